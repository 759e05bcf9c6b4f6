//! Finding a value's bytes in JSON text by key path, so that `json-update` can replace
//! exactly those bytes and keep every other byte (indentation, key order, spacing) as the
//! author wrote it. The text must already be valid JSON (the caller parses it first).
//!
//! Not a step.

use std::ops::Range;

use super::key_path::place;

/// The byte range of the value at `path` in `text`, or, in words, why there is none.
pub(crate) fn value_span(text: &str, path: &[String]) -> Result<Range<usize>, String> {
    let bytes = text.as_bytes();
    let mut at = skip_ws(bytes, 0);
    for (depth, part) in path.iter().enumerate() {
        let here = place(&path[..depth]);
        at = match bytes.get(at) {
            Some(b'{') => member(text, at, part).ok_or_else(|| {
                format!(
                    "{here} has no key `{part}`; check the key (json-update sets existing keys)"
                )
            })?,
            Some(b'[') => {
                let index: usize = part.parse().map_err(|_| {
                    format!("{here} is a list: use an item number instead of `{part}`")
                })?;
                item(bytes, at, index)
                    .ok_or_else(|| format!("{here} has no item {index} (lists never grow)"))?
            }
            _ => return Err(format!("{here} is a single value, so it has no `{part}`")),
        };
    }
    Ok(at..skip_value(bytes, at))
}

/// The start of the value of `key` in the object starting at `open`.
fn member(text: &str, open: usize, key: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut at = skip_ws(bytes, open + 1);
    while bytes.get(at) == Some(&b'"') {
        let end = skip_string(bytes, at);
        let name: String = serde_json::from_str(&text[at..end]).ok()?;
        at = skip_ws(bytes, end);
        at = skip_ws(bytes, at + 1); // the `:`
        if name == key {
            return Some(at);
        }
        at = skip_ws(bytes, skip_value(bytes, at));
        if bytes.get(at) == Some(&b',') {
            at = skip_ws(bytes, at + 1);
        }
    }
    None
}

/// The start of item `index` of the list starting at `open`.
fn item(bytes: &[u8], open: usize, index: usize) -> Option<usize> {
    let mut at = skip_ws(bytes, open + 1);
    for _ in 0..index {
        if bytes.get(at) == Some(&b']') {
            return None;
        }
        at = skip_ws(bytes, skip_value(bytes, at));
        if bytes.get(at) != Some(&b',') {
            return None;
        }
        at = skip_ws(bytes, at + 1);
    }
    (bytes.get(at) != Some(&b']')).then_some(at)
}

fn skip_ws(bytes: &[u8], mut at: usize) -> usize {
    while bytes.get(at).is_some_and(|b| b.is_ascii_whitespace()) {
        at += 1;
    }
    at
}

/// The end (exclusive) of the string starting at `open` (a `"`).
fn skip_string(bytes: &[u8], open: usize) -> usize {
    let mut at = open + 1;
    while let Some(&b) = bytes.get(at) {
        match b {
            b'\\' => at += 2,
            b'"' => return at + 1,
            _ => at += 1,
        }
    }
    at
}

/// The end (exclusive) of the value starting at `start`.
fn skip_value(bytes: &[u8], start: usize) -> usize {
    match bytes.get(start) {
        Some(b'"') => skip_string(bytes, start),
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            let mut at = start;
            while let Some(&b) = bytes.get(at) {
                match b {
                    b'"' => {
                        at = skip_string(bytes, at);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return at + 1;
                        }
                    }
                    _ => {}
                }
                at += 1;
            }
            at
        }
        _ => {
            let mut at = start;
            while bytes
                .get(at)
                .is_some_and(|b| !matches!(b, b',' | b'}' | b']') && !b.is_ascii_whitespace())
            {
                at += 1;
            }
            at
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str, path: &str) -> Result<String, String> {
        let parts: Vec<String> = path.split('.').map(str::to_owned).collect();
        value_span(text, &parts).map(|r| text[r].to_owned())
    }

    #[test]
    fn finds_values_at_any_depth_past_tricky_strings() {
        let text = r#"{
  "a\"}": {"x": "}]\\", "y": [1, {"z": true}]},
  "image": { "tag" : "1.0.0" },
  "n": -1.5e3, "e": {}, "l": []
}"#;
        assert_eq!(at(text, "image.tag").unwrap(), r#""1.0.0""#);
        assert_eq!(at(text, "a\"}.y.1.z").unwrap(), "true");
        assert_eq!(at(text, "a\"}.x").unwrap(), r#""}]\\""#);
        assert_eq!(at(text, "n").unwrap(), "-1.5e3");
        assert_eq!(at(text, "a\"}.y").unwrap(), r#"[1, {"z": true}]"#);
        assert!(
            at(text, "image.nope")
                .unwrap_err()
                .contains("`image` has no key `nope`")
        );
        assert!(at(text, "a\"}.y.2").unwrap_err().contains("has no item 2"));
        assert!(at(text, "a\"}.y.x").unwrap_err().contains("is a list"));
        assert!(
            at(text, "n.x")
                .unwrap_err()
                .contains("`n` is a single value")
        );
        assert!(at(text, "e.x").is_err());
        assert!(at(text, "l.0").is_err());
    }
}
