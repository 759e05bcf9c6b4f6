//! Values crossing between JSON and expr-lang, and expr-lang values written as Go's
//! `encoding/json` writes them (Kargo stringifies a non-string result that way): map keys
//! sorted, `<`, `>` and `&` escaped, floats in Go's shortest form.

use expr::Value;
use serde_json::Number;

/// A JSON value as an expr-lang value: integers as `int` (beyond `i64`, `float`), other
/// numbers `float`, objects maps.
pub fn json_to_expr(value: &serde_json::Value) -> Value {
    match value {
        serde_json::Value::Null => Value::Nil,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::Integer(i),
            None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        serde_json::Value::String(s) => Value::String(s.clone()),
        serde_json::Value::Array(items) => Value::Array(items.iter().map(json_to_expr).collect()),
        serde_json::Value::Object(fields) => fields
            .iter()
            .map(|(k, v)| (k.clone(), json_to_expr(v)))
            .collect(),
    }
}

/// A point in time as expr-lang's time (Go's `time.Time` to Kargo's expressions), in UTC:
/// `commitDate.Year()`, `commitDate.After(date('2025-01-01'))`.
pub fn time_to_expr(at: jiff::Timestamp) -> Value {
    let nanos = u32::try_from(at.subsec_nanosecond()).unwrap_or(0);
    match chrono::DateTime::from_timestamp(at.as_second(), nanos) {
        Some(utc) => Value::DateTime(expr::DateTimeValue::fixed(utc.fixed_offset())),
        // Outside chrono's range (±262,000 years): no commit has such a date.
        None => Value::String(at.to_string()),
    }
}

/// An expr-lang value as JSON, or a description of what has no JSON form. Dates become
/// RFC 3339 strings and durations nanoseconds, as Go's `encoding/json` writes them.
pub fn expr_to_json(value: &Value) -> Result<serde_json::Value, String> {
    Ok(match value {
        Value::Nil => serde_json::Value::Null,
        Value::Bool(b) => serde_json::Value::Bool(*b),
        Value::Integer(i) => serde_json::Value::from(*i),
        Value::Float(f) => Number::from_f64(*f)
            .map(serde_json::Value::Number)
            .ok_or_else(|| format!("the float `{f}`"))?,
        Value::String(s) => serde_json::Value::String(s.clone()),
        Value::Bytes(b) => serde_json::Value::String(
            String::from_utf8(b.clone()).map_err(|_| "bytes that are not UTF-8".to_owned())?,
        ),
        Value::Array(items) => {
            serde_json::Value::Array(items.iter().map(expr_to_json).collect::<Result<_, _>>()?)
        }
        Value::Map(fields) => {
            let mut map = serde_json::Map::new();
            for (k, v) in fields {
                map.insert(k.clone(), expr_to_json(v)?);
            }
            serde_json::Value::Object(map)
        }
        Value::KeyedMap(pairs) => {
            let mut map = serde_json::Map::new();
            for (k, v) in pairs {
                let key = match k {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                map.insert(key, expr_to_json(v)?);
            }
            serde_json::Value::Object(map)
        }
        Value::DateTime(_) => serde_json::Value::String(value.to_string()),
        Value::Duration(nanos) => serde_json::Value::from(*nanos),
        other => return Err(format!("a {}", type_name(other))),
    })
}

/// expr-lang's name of `value`'s type, for messages.
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Nil => "nil",
        Value::Bool(_) => "bool",
        Value::Integer(_) => "int",
        Value::Float(_) => "float",
        Value::String(_) => "string",
        Value::Bytes(_) => "bytes",
        Value::Array(_) => "array",
        Value::Map(_) | Value::KeyedMap(_) => "map",
        Value::DateTime(_) => "date",
        Value::Duration(_) => "duration",
        Value::Timezone(_) => "timezone",
        Value::Month(_) => "month",
        Value::Weekday(_) => "weekday",
    }
}

/// `value` as Go's `json.Marshal` writes it.
pub(crate) fn go_json(value: &serde_json::Value) -> String {
    let mut out = String::new();
    write_go_json(value, &mut out);
    out
}

fn write_go_json(value: &serde_json::Value, out: &mut String) {
    match value {
        serde_json::Value::Null => out.push_str("null"),
        serde_json::Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        serde_json::Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => out.push_str(&i.to_string()),
            (None, Some(u), _) => out.push_str(&u.to_string()),
            (_, _, Some(f)) => out.push_str(&go_float(f)),
            _ => out.push_str(&n.to_string()),
        },
        serde_json::Value::String(s) => write_go_string(s, out),
        serde_json::Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_json(item, out);
            }
            out.push(']');
        }
        serde_json::Value::Object(fields) => {
            // serde_json's map is ordered by key, as Go sorts a map's keys
            out.push('{');
            for (i, (k, v)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_string(k, out);
                out.push(':');
                write_go_json(v, out);
            }
            out.push('}');
        }
    }
}

fn write_go_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A float as Go's `encoding/json` writes it: plain between 1e-6 and 1e21, else with an
/// exponent (`1e+21`, `1e-07`).
pub(crate) fn go_float(f: f64) -> String {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let text = format!("{f:e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        let (sign, digits) = match exponent.strip_prefix('-') {
            Some(digits) => ('-', digits),
            None => ('+', exponent),
        };
        let digits = if digits.len() < 2 {
            format!("0{digits}")
        } else {
            digits.to_owned()
        };
        format!("{mantissa}e{sign}{digits}")
    } else {
        format!("{f}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_round_trips_through_expr() {
        let value = json!({"a": [1, 2.5, "s", true, null], "b": {"c": -3}});
        assert_eq!(expr_to_json(&json_to_expr(&value)).unwrap(), value);
        assert!(expr_to_json(&Value::Float(f64::NAN)).is_err());
        assert_eq!(
            json_to_expr(&json!(u64::MAX)),
            Value::Float(u64::MAX as f64)
        );
    }

    #[test]
    fn go_json_sorts_keys_and_escapes_html() {
        assert_eq!(
            go_json(&json!({"b": 1, "a": "<&>", "c": [1.5, null, true]})),
            r#"{"a":"\u003c\u0026\u003e","b":1,"c":[1.5,null,true]}"#
        );
        assert_eq!(go_float(1e21), "1e+21");
        assert_eq!(go_float(1e-7), "1e-07");
        assert_eq!(go_float(0.05), "0.05");
        assert_eq!(go_float(100.0), "100");
    }
}
