//! The subset of Kubernetes JSONPath that Argo Rollouts' web metrics use to pick a value
//! out of a JSON answer: `{$.data.ok}`, `{$.items[0].value}`, `{$['a-b'].c}` (braces and
//! `$` optional). Filters, wildcards and ranges are not supported.

use serde_json::Value;

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// A parsed path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPath {
    text: String,
    steps: Vec<Step>,
}

impl JsonPath {
    /// Parses `text`; the error says what is wrong and what is accepted.
    pub fn parse(text: &str) -> Result<Self, String> {
        let hint = "write a path such as `{$.data.ok}` or `{$.items[0].value}`";
        let trimmed = text.trim();
        let inner = match (trimmed.strip_prefix('{'), trimmed.ends_with('}')) {
            (Some(rest), true) => &rest[..rest.len() - 1],
            (None, false) => trimmed,
            _ => return Err(format!("`{text}` has unbalanced braces; {hint}")),
        };
        let inner = inner.trim();
        let mut rest = inner.strip_prefix('$').unwrap_or(inner);
        let mut steps = Vec::new();
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix("['").or_else(|| rest.strip_prefix("[\"")) {
                let quote = if rest.starts_with("['") { "']" } else { "\"]" };
                let Some(end) = after.find(quote) else {
                    return Err(format!("`{text}`: a quoted key is not closed; {hint}"));
                };
                steps.push(Step::Key(after[..end].to_owned()));
                rest = &after[end + 2..];
            } else if let Some(after) = rest.strip_prefix('[') {
                let Some(end) = after.find(']') else {
                    return Err(format!("`{text}`: `[` is not closed; {hint}"));
                };
                let index = after[..end].trim().parse::<usize>().map_err(|_| {
                    format!(
                        "`{text}`: `[{}]` is not an index (filters, wildcards and ranges are not supported); {hint}",
                        &after[..end]
                    )
                })?;
                steps.push(Step::Index(index));
                rest = &after[end + 1..];
            } else if let Some(after) = rest.strip_prefix('.') {
                let end = after.find(['.', '[']).unwrap_or(after.len());
                let key = &after[..end];
                if key.is_empty() || key == "*" {
                    return Err(format!("`{text}`: expected a key after `.`; {hint}"));
                }
                steps.push(Step::Key(key.to_owned()));
                rest = &after[end..];
            } else if steps.is_empty() && inner == rest {
                // `data.ok` without `$.`
                rest = match rest.find(['.', '[']) {
                    Some(end) => {
                        steps.push(Step::Key(rest[..end].to_owned()));
                        &rest[end..]
                    }
                    None => {
                        steps.push(Step::Key(rest.to_owned()));
                        ""
                    }
                };
            } else {
                return Err(format!("`{text}`: unexpected `{rest}`; {hint}"));
            }
        }
        Ok(Self {
            text: text.to_owned(),
            steps,
        })
    }

    /// The path as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The value at this path in `value`, if there is one.
    pub fn get<'v>(&self, value: &'v Value) -> Option<&'v Value> {
        self.steps.iter().try_fold(value, |node, step| match step {
            Step::Key(key) => node.get(key),
            Step::Index(i) => node.get(*i),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn reads_rollouts_style_paths() {
        let body = json!({"data": {"ok": true, "items": [{"v": 1}, {"v": 2}], "a-b": 3}});
        let get = |p: &str| JsonPath::parse(p).unwrap().get(&body).cloned();
        assert_eq!(get("{$.data.ok}"), Some(json!(true)));
        assert_eq!(get("$.data.items[1].v"), Some(json!(2)));
        assert_eq!(get("{$.data['a-b']}"), Some(json!(3)));
        assert_eq!(get("data.ok"), Some(json!(true)));
        assert_eq!(get("{$}"), Some(body.clone()));
        assert_eq!(get("{$.data.missing}"), None);
        assert_eq!(get("{$.data.items[5]}"), None);
    }

    #[test]
    fn rejects_what_it_does_not_support() {
        for bad in [
            "{$.data",
            "{$.items[*]}",
            "{$.items[?(@.v)]}",
            "{$..x}",
            "{$['a}",
        ] {
            assert!(JsonPath::parse(bad).is_err(), "{bad}");
        }
    }
}
