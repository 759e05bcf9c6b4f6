//! `{{args.NAME}}` in metric fields, as Argo Rollouts writes it: finding the names a text
//! uses (for `dray apply`) and substituting values (when a run is prepared). Spaces inside
//! the braces are allowed (`{{ args.NAME }}`); other `{{…}}` text is left as it is.

use std::collections::BTreeMap;

/// One `{{args.NAME}}` found in a text: its byte range and the name.
struct Use<'t> {
    start: usize,
    end: usize,
    name: &'t str,
}

fn uses(text: &str) -> Vec<Use<'_>> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(open) = text[from..].find("{{").map(|i| i + from) {
        let Some(close) = text[open + 2..].find("}}").map(|i| i + open + 2) else {
            break;
        };
        let inner = text[open + 2..close].trim();
        match inner.strip_prefix("args.") {
            Some(name)
                if !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) =>
            {
                found.push(Use {
                    start: open,
                    end: close + 2,
                    name,
                });
                from = close + 2;
            }
            _ => from = open + 2,
        }
    }
    found
}

/// The argument names `text` uses, in order of first use.
pub fn referenced(text: &str) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for u in uses(text) {
        if !names.contains(&u.name) {
            names.push(u.name);
        }
    }
    names
}

/// `text` with every `{{args.NAME}}` replaced by its value; the first name without a
/// value is the error.
pub(super) fn substitute(text: &str, values: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for u in uses(text) {
        let value = values.get(u.name).ok_or_else(|| u.name.to_owned())?;
        out.push_str(&text[last..u.start]);
        out.push_str(value);
        last = u.end;
    }
    out.push_str(&text[last..]);
    Ok(out)
}

/// What stands for every arg when a condition is checked before any run (`dray apply`):
/// a number, since args in conditions are most often thresholds (`result[0] >= {{args.min}}`).
pub const PLACEHOLDER: &str = "0";

/// `text` with every `{{args.NAME}}` replaced by [`PLACEHOLDER`], to check that it
/// compiles before the values are known.
pub fn with_placeholders(text: &str) -> String {
    let values = referenced(text)
        .into_iter()
        .map(|name| (name.to_owned(), PLACEHOLDER.to_owned()))
        .collect();
    substitute(text, &values).unwrap_or_else(|_| text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_and_substitutes_args() {
        let query = r#"sum(rate(x{service="{{args.service}}", v="{{ args.version }}"}[5m])) {{other}} {{args.service}}"#;
        assert_eq!(referenced(query), vec!["service", "version"]);
        let values = BTreeMap::from([
            ("service".to_owned(), "web".to_owned()),
            ("version".to_owned(), "1.2".to_owned()),
        ]);
        assert_eq!(
            substitute(query, &values).unwrap(),
            r#"sum(rate(x{service="web", v="1.2"}[5m])) {{other}} web"#
        );
        let partial = BTreeMap::from([("service".to_owned(), "web".to_owned())]);
        assert_eq!(substitute(query, &partial), Err("version".to_owned()));
        assert_eq!(substitute("no args {{", &partial).unwrap(), "no args {{");
    }
}
