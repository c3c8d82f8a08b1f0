//! The JSON report has a checked-in JSON Schema (schema/report.schema.json) that matches the report types, and
//! real reports validate against it.

use serde_json::Value;

use crate::common::*;

fn resolve<'a>(root: &'a Value, s: &'a Value) -> &'a Value {
    match s.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let name = r.rsplit('/').next().unwrap();
            resolve(root, &root["definitions"][name])
        }
        None => s,
    }
}

/// A small validator for the subset schemars emits (type, properties, required, items, enum, anyOf, oneOf, allOf).
fn validate(root: &Value, schema: &Value, v: &Value, path: &str, errors: &mut Vec<String>) {
    let s = resolve(root, schema);
    if let Some(all) = s.get("allOf").and_then(Value::as_array) {
        all.iter().for_each(|x| validate(root, x, v, path, errors));
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = s.get(key).and_then(Value::as_array) {
            let ok = options.iter().any(|o| {
                let mut e = vec![];
                validate(root, o, v, path, &mut e);
                e.is_empty()
            });
            if !ok {
                errors.push(format!("{path}: matches none of {key}"));
            }
        }
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        if !e.contains(v) {
            errors.push(format!("{path}: {v} not in enum"));
        }
    }
    if let Some(c) = s.get("const") {
        if c != v {
            errors.push(format!("{path}: {v} != const {c}"));
        }
    }
    if let Some(t) = s.get("type") {
        let types: Vec<&str> = match t {
            Value::String(x) => vec![x.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let ok = types.iter().any(|t| match *t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "number" => v.is_number(),
            "integer" => v.is_i64() || v.is_u64(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            _ => false,
        });
        if !ok {
            errors.push(format!("{path}: {v} is not {types:?}"));
            return;
        }
    }
    if let (Some(props), Some(obj)) = (
        s.get("properties").and_then(Value::as_object),
        v.as_object(),
    ) {
        for req in s
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if !obj.contains_key(req.as_str().unwrap()) {
                errors.push(format!("{path}: missing required {req}"));
            }
        }
        for (k, val) in obj {
            match props.get(k) {
                Some(ps) => validate(root, ps, val, &format!("{path}.{k}"), errors),
                None if s.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    errors.push(format!("{path}: unexpected {k}"))
                }
                None => {}
            }
        }
    }
    if let (Some(ap), Some(obj)) = (
        s.get("additionalProperties").filter(|a| a.is_object()),
        v.as_object(),
    ) {
        for (k, val) in obj {
            validate(root, ap, val, &format!("{path}.{k}"), errors);
        }
    }
    if let (Some(items), Some(arr)) = (s.get("items"), v.as_array()) {
        for (i, x) in arr.iter().enumerate() {
            validate(root, items, x, &format!("{path}[{i}]"), errors);
        }
    }
}

#[test]
fn checked_in_schemas_match_report_types() {
    for (file, generated) in [
        ("report.schema.json", phantom::report::json::schema()),
        (
            "multi-report.schema.json",
            phantom::report::json::multi_schema(),
        ),
        ("diff-report.schema.json", phantom::diff::report::schema()),
    ] {
        let path = root().join("schema").join(file);
        let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
        if checked_in != generated && std::env::var_os("PHANTOM_BLESS").is_some() {
            std::fs::write(&path, &generated).unwrap();
            continue;
        }
        assert_eq!(
            checked_in, generated,
            "schema/{file} is stale: rerun with PHANTOM_BLESS=1"
        );
    }
}

/// Validates a report against one of the checked-in schemas.
pub fn assert_valid(report: &Value, multi: bool) {
    let text = match multi {
        true => phantom::report::json::multi_schema(),
        false => phantom::report::json::schema(),
    };
    let schema: Value = serde_json::from_str(&text).unwrap();
    let mut errors = vec![];
    validate(&schema, &schema, report, "$", &mut errors);
    assert!(errors.is_empty(), "{errors:#?}");
}

#[test]
fn real_reports_validate_against_the_schema() {
    ensure_runtime();
    let schema: Value = serde_json::from_str(&phantom::report::json::schema()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("p.onnx");
    perturbed_copy(&model("encoder.onnx"), "ln2", 1.01, &target);
    for extra in [vec![], vec!["--target-model", target.to_str().unwrap()]] {
        let json = dir.path().join("r.json");
        let mut args = vec![
            "onnx",
            model("encoder.onnx").to_str().unwrap().to_string().leak() as &str,
            "--json",
            json.to_str().unwrap(),
        ];
        args.extend(extra.iter().copied());
        let (code, _, err) = phantom(&args);
        assert!(code == 0 || code == 1, "{err}");
        let report = read_json(&json);
        let mut errors = vec![];
        validate(&schema, &schema, &report, "$", &mut errors);
        assert!(errors.is_empty(), "{errors:#?}");
    }
}
