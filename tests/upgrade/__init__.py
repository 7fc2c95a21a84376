"""The upgrade procedure as one worked example: the workflow ``UpgradeExample`` in four
stages (``stage_1_initial`` ... ``stage_4_patch_complete``), after samples-python
``patching/``. ``tests/test_upgrade_procedure.py`` replays each stage's histories under
the others and swaps workers on a real server, so the procedure in docs/operations.md
is checked, not just described. The engine itself carries no such example patches."""
