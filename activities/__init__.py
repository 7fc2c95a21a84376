"""The engine's and the agent SDK's activities: model calls, tools' runs, webhooks."""
