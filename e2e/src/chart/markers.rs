//! Marker strings: the generator edits objects as data, putting a marker where a value
//! or block of the installer's goes, serialises them to YAML, and [`substitute`] then
//! turns each marker line into template expressions at the marker's indentation. Text
//! Helm would read as a template (`{{` in a CEL message or an alert's annotation) is
//! escaped first ([`escape_braces`]).

use serde_json::Value;

/// The release namespace.
pub const NS: &str = "__TAS_NS__";
/// The node agents' namespace (`tas.updaterNamespace`).
pub const AGENTS_NS: &str = "__TAS_AGENTS_NS__";
/// The operands' namespace (`tas.operandNamespace`).
pub const OPERAND_NS: &str = "__TAS_OPERAND_NS__";
/// `__TAS_IMAGE_<name>__`: an image of the release.
pub const IMAGE: &str = "__TAS_IMAGE_";
/// `key: __TAS_VALUE_<path>__`: the value at `.Values.<path>`, as is.
pub const VALUE: &str = "__TAS_VALUE_";
/// `key: __TAS_BLOCK_<path>__`: the YAML block at `.Values.<path>`.
pub const BLOCK: &str = "__TAS_BLOCK_";
/// `key: __TAS_WITH_<path>__`: the block at `.Values.<path>`, left out when empty.
pub const WITH: &str = "__TAS_WITH_";
/// `key: __TAS_OPT_<path>__`: the scalar at `.Values.<path>`, left out when empty.
pub const OPT: &str = "__TAS_OPT_";
/// `key: __TAS_LIST_<path>__`: the list at `.Values.<path>` joined by commas, quoted.
pub const LIST: &str = "__TAS_LIST_";
/// A key of `metadata.labels`: the chart's standard labels go there (value `plain`),
/// and on monitoring objects also `monitoring.labels` (value `monitoring`).
pub const LABELS: &str = "__TAS_LABELS__";
/// A key of a map: the map at `.Values.<value>` merged in there.
pub const MERGE: &str = "__TAS_MERGE__";
/// An env entry's name: `.Values.operator.extraEnv` goes there.
pub const EXTRA_ENV: &str = "__TAS_EXTRA_ENV__";
/// A key of the CRD's annotations: `helm.sh/resource-policy: keep` with `crds.keep`.
pub const KEEP: &str = "__TAS_KEEP__";

/// `{{` and `}}` in any string become template expressions printing them.
pub fn escape_braces(value: &mut Value) {
    match value {
        Value::String(s) if s.contains("{{") || s.contains("}}") => {
            let mut out = String::new();
            let mut rest = s.as_str();
            while let Some(i) = rest.find(['{', '}']) {
                let pair = &rest[i..rest.len().min(i + 2)];
                if pair == "{{" || pair == "}}" {
                    out.push_str(&rest[..i]);
                    out.push_str(&format!("{{{{ \"{pair}\" }}}}"));
                    rest = &rest[i + 2..];
                } else {
                    out.push_str(&rest[..=i]);
                    rest = &rest[i + 1..];
                }
            }
            out.push_str(rest);
            *s = out;
        }
        Value::Array(items) => items.iter_mut().for_each(escape_braces),
        Value::Object(map) => map.values_mut().for_each(escape_braces),
        _ => {}
    }
}

/// The template expression of image `name` of the release (its digest value wins
/// over the tag), `root` being the expression of the chart's root context (`.`, or a
/// variable holding it).
pub fn image_expr(name: &str, root: &str) -> String {
    let digest = match name {
        "tas-updater" => "image.updaterDigest",
        "tas-scheduler" => "image.schedulerDigest",
        _ => "image.digest",
    };
    let values = if root == "." {
        ".Values".to_owned()
    } else {
        format!("{root}.Values")
    };
    format!("{{{{ include \"tas.image\" (list {root} \"{name}\" {values}.{digest}) }}}}")
}

/// The markers replaced by template expressions, line by line.
pub fn substitute(yaml: &str) -> String {
    let mut out = String::new();
    for line in yaml.lines() {
        let indent = line.len() - line.trim_start().len();
        let (key_col, rest) = match line.trim_start().strip_prefix("- ") {
            Some(rest) => (indent + 2, rest),
            None => (indent, line.trim_start()),
        };
        let head = &line[..key_col];
        let pad = " ".repeat(key_col);
        let nested = key_col + 2;
        if let Some((key, path)) = marker(rest, BLOCK) {
            out.push_str(&format!(
                "{head}{key}:\n{pad}  {{{{- toYaml .Values.{path} | nindent {nested} }}}}\n"
            ));
        } else if let Some((key, path)) = marker(rest, LIST) {
            // A plain string value, as in config/ (the admission policy reads it there).
            out.push_str(&format!(
                "{head}{key}: {{{{ join \",\" .Values.{path} | quote }}}}\n"
            ));
        } else if let Some((key, path)) = marker(rest, VALUE) {
            out.push_str(&format!("{head}{key}: {{{{ .Values.{path} }}}}\n"));
        } else if let Some((key, path)) = marker(rest, WITH) {
            out.push_str(&format!(
                "{{{{- with .Values.{path} }}}}\n{head}{key}:\n{pad}  {{{{- toYaml . | nindent {nested} }}}}\n{{{{- end }}}}\n"
            ));
        } else if let Some((key, path)) = marker(rest, OPT) {
            out.push_str(&format!(
                "{{{{- with .Values.{path} }}}}\n{head}{key}: {{{{ . }}}}\n{{{{- end }}}}\n"
            ));
        } else if let Some(kind) = rest.strip_prefix(&format!("{LABELS}: ")) {
            out.push_str(&format!(
                "{pad}{{{{- include \"tas.labels\" . | nindent {key_col} }}}}\n"
            ));
            if kind == "monitoring" {
                out.push_str(&format!(
                    "{pad}{{{{- with .Values.monitoring.labels }}}}\n{pad}{{{{- toYaml . | nindent {key_col} }}}}\n{pad}{{{{- end }}}}\n"
                ));
            }
        } else if let Some(path) = rest.strip_prefix(&format!("{MERGE}: ")) {
            out.push_str(&format!(
                "{pad}{{{{- with .Values.{path} }}}}\n{pad}{{{{- toYaml . | nindent {key_col} }}}}\n{pad}{{{{- end }}}}\n"
            ));
        } else if rest == format!("name: {EXTRA_ENV}") {
            out.push_str(&format!(
                "{{{{- with .Values.operator.extraEnv }}}}\n{}{{{{- toYaml . | nindent {indent} }}}}\n{{{{- end }}}}\n",
                " ".repeat(indent)
            ));
        } else if rest.starts_with(&format!("{KEEP}: ")) {
            out.push_str(&format!(
                "{{{{- if .Values.crds.keep }}}}\n{pad}helm.sh/resource-policy: keep\n{{{{- end }}}}\n"
            ));
        } else {
            let mut line = line
                .replace(NS, "{{ .Release.Namespace }}")
                .replace(AGENTS_NS, "{{ include \"tas.updaterNamespace\" . }}")
                .replace(OPERAND_NS, "{{ include \"tas.operandNamespace\" . }}");
            for name in super::templatize::IMAGES {
                line = line.replace(&format!("{IMAGE}{name}__"), &image_expr(name, "."));
            }
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

/// `key: <prefix>path__` → (key, path).
fn marker<'a>(rest: &'a str, prefix: &str) -> Option<(&'a str, &'a str)> {
    let (key, value) = rest.split_once(": ")?;
    let path = value.strip_prefix(prefix)?.strip_suffix("__")?;
    Some((key, path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn braces_print_themselves() {
        let mut v = json!({"a": ["{{ $labels.pod }} x{y}", "plain"]});
        escape_braces(&mut v);
        assert_eq!(
            v,
            json!({"a": ["{{ \"{{\" }} $labels.pod {{ \"}}\" }} x{y}", "plain"]})
        );
    }

    #[test]
    fn block_markers_become_to_yaml_at_their_indent() {
        let out =
            substitute("      - name: x\n        resources: __TAS_BLOCK_operator.resources__\n");
        assert_eq!(
            out,
            "      - name: x\n        resources:\n          {{- toYaml .Values.operator.resources | nindent 10 }}\n"
        );
    }

    #[test]
    fn label_markers_include_the_standard_labels() {
        let out = substitute("  labels:\n    __TAS_LABELS__: monitoring\n    a: b\n");
        assert_eq!(
            out,
            "  labels:\n    {{- include \"tas.labels\" . | nindent 4 }}\n    {{- with .Values.monitoring.labels }}\n    {{- toYaml . | nindent 4 }}\n    {{- end }}\n    a: b\n"
        );
    }

    #[test]
    fn extra_env_goes_at_the_list_indent() {
        let out = substitute("        - name: __TAS_EXTRA_ENV__\n");
        assert_eq!(
            out,
            "{{- with .Values.operator.extraEnv }}\n        {{- toYaml . | nindent 8 }}\n{{- end }}\n"
        );
    }
}
