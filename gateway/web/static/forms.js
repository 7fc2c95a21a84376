// Forms generated from a JSON Schema with json-editor (gateway/web/node_modules, served
// at /inbox/vendor/jsoneditor.js): required fields, enums, formats, and validation
// messages shown before anything is sent.

const OPTIONS = {
  theme: 'html',
  iconlib: null,
  disable_collapse: true,
  disable_edit_json: true,
  disable_properties: true,
  disable_array_delete_all_rows: true,
  disable_array_delete_last_row: true,
  prompt_before_delete: false,
  no_additional_properties: true,
  show_errors: 'interaction',
  // Its theme rules would be a <style> element, which the page's CSP forbids; the
  // page's stylesheet styles the form instead.
  disable_theme_rules: true,
};

/** A form for ``schema`` in ``element``, starting at ``value`` if given; resolves once
 * the form is ready. */
export async function schemaForm(element, schema, value) {
  const JSONEditor = window.JSONEditor;
  const options = { ...OPTIONS, schema: withoutDescriptionOnRoot(schema) };
  if (value !== undefined) options.startval = value;
  const editor = new JSONEditor(element, options);
  await editor.promise;
  return {
    value: () => editor.getValue(),
    /** The validation errors, shown next to their fields too: [] when valid. */
    check() {
      const errors = editor.validate();
      if (errors.length) editor.showValidationErrors(errors);
      return errors;
    },
    destroy: () => editor.destroy(),
  };
}

/** The schema without its root description, which the page shows itself. */
function withoutDescriptionOnRoot(schema) {
  if (!schema || typeof schema !== 'object') return {};
  const { description: _description, ...rest } = schema;
  return rest;
}

/** Validation errors in words: "year: Value must be at least 2000." */
export function errorsText(errors) {
  return errors
    .map((error) => {
      const field = error.path.replace(/^root\.?/, '');
      return field ? `${field}: ${error.message}` : error.message;
    })
    .join(' ');
}
