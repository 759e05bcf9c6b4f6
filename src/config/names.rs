//! Name rules: resource names and the names that reference them are RFC 1123 labels
//! (lowercase letters, digits and `-`, starting and ending with a letter or digit, at most 63
//! characters); Freight ids may be up to 253 characters. Errors suggest a valid spelling.

use super::error::Issue;
use super::path::FieldPath;

pub(crate) use crate::api::label::MAX_LABEL;
/// The longest Freight id (a hash).
pub(crate) const MAX_FREIGHT: usize = 253;

/// Whether `name` is a valid name of at most `max` characters ([`crate::api::label`]).
pub(crate) fn is_valid(name: &str, max: usize) -> bool {
    crate::api::label::is_label(name, max)
}

/// A valid spelling close to `name` (lowercased, other characters turned into `-`), if any.
pub(crate) fn suggest(name: &str, max: usize) -> Option<String> {
    let out = crate::api::label::to_label(name, max);
    (!out.is_empty() && out != name && is_valid(&out, max)).then_some(out)
}

/// Checks one name; `what` says what it names, e.g. "name" or "upstream stage name".
pub(crate) fn check(name: &str, max: usize, what: &str, path: FieldPath) -> Option<Issue> {
    if is_valid(name, max) {
        return None;
    }
    let message = if name.is_empty() {
        format!("the {what} is empty")
    } else {
        format!(
            "`{name}` is not a valid {what}: use lowercase letters, digits and `-`, starting and \
             ending with a letter or digit, at most {max} characters"
        )
    };
    let hint = match suggest(name, max) {
        Some(valid) => format!("write `{valid}` instead"),
        None => "choose a name such as `staging` or `prod-eu-1`".to_owned(),
    };
    Some(Issue::new(path, message).hint(hint))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_rfc1123_labels_only() {
        for good in ["a", "dev", "prod-eu-1", "0abc", &"a".repeat(63)] {
            assert!(is_valid(good, MAX_LABEL), "{good}");
        }
        for bad in ["", "Dev", "-a", "a-", "a_b", "a.b", "ä", &"a".repeat(64)] {
            assert!(!is_valid(bad, MAX_LABEL), "{bad}");
        }
        assert!(is_valid(&"f".repeat(200), MAX_FREIGHT));
    }

    #[test]
    fn suggests_a_valid_spelling() {
        assert_eq!(
            suggest("Staging_1", MAX_LABEL).as_deref(),
            Some("staging-1")
        );
        assert_eq!(suggest("--My  App--", MAX_LABEL).as_deref(), Some("my-app"));
        assert_eq!(suggest("___", MAX_LABEL), None);
        assert_eq!(
            suggest(&"ab-".repeat(30), MAX_LABEL).map(|s| s.len()),
            Some(62)
        );
    }

    #[test]
    fn explains_and_hints() {
        let issue = check(
            "Staging_1",
            MAX_LABEL,
            "name",
            FieldPath::of(&["metadata", "name"]),
        );
        let issue = issue.unwrap();
        assert!(issue.message.starts_with("`Staging_1` is not a valid name"));
        assert_eq!(issue.hint.as_deref(), Some("write `staging-1` instead"));
        assert!(check("staging-1", MAX_LABEL, "name", FieldPath::root()).is_none());
    }
}
