//! RFC 1123 labels, the rule for resource names, aliases and Promotion names: lowercase
//! letters, digits and `-`, starting and ending with a letter or digit, at most 63
//! characters (Freight ids may be longer; callers pass the bound). One rule, one
//! spelling fix, for `dray apply`, hand-made Freight and Promotion names alike.

/// The longest RFC 1123 label.
pub const MAX_LABEL: usize = 63;

/// Whether `name` is lowercase alphanumerics and `-`, starts and ends alphanumeric, and is
/// at most `max` characters long.
pub fn is_label(name: &str, max: usize) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = name.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            bytes.len() <= max
                && alnum(*first)
                && alnum(*last)
                && bytes.iter().all(|b| alnum(*b) || *b == b'-')
        }
        _ => false,
    }
}

/// `text` made into a label of at most `max` characters: lowercased, every run of other
/// characters turned into one `-`, `-` trimmed at both ends; empty when nothing is left.
pub fn to_label(text: &str, max: usize) -> String {
    let mut out = String::new();
    for c in text.trim().chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let mut out: String = out.trim_matches('-').chars().take(max).collect();
    while out.ends_with('-') {
        out.pop();
    }
    out
}

/// `value` as a Kubernetes label value (at most 63 characters): as it is when it fits, else
/// its first characters, `-` and the first 10 hex digits of its SHA-256, so that distinct
/// long names stay distinct. Names (RFC 1123 subdomains) and Freight ids may be up to 253
/// characters, which the API server refuses as label values; labels are for selecting
/// with `kubectl -l`, never read back by Dray, so a hashed value loses nothing.
pub fn label_value(value: &str) -> String {
    use sha2::Digest as _;
    if value.len() <= MAX_LABEL {
        return value.to_owned();
    }
    let digest = sha2::Sha256::digest(value.as_bytes());
    let hash: String = digest.iter().take(5).map(|b| format!("{b:02x}")).collect();
    let keep = MAX_LABEL - hash.len() - 1;
    // Names are ASCII; `chars` keeps a stray multi-byte one whole all the same.
    let prefix: String = value.chars().take(keep).collect();
    let prefix = prefix.trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    format!("{prefix}-{hash}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_fit_the_api_servers_bound_and_stay_distinct() {
        assert_eq!(label_value("dev"), "dev");
        let exact = "a".repeat(MAX_LABEL);
        assert_eq!(label_value(&exact), exact);
        let long = format!(
            "{}.team-a.example.com",
            "payments-eu-west-1-canary".repeat(4)
        );
        let value = label_value(&long);
        assert_eq!(value.len(), MAX_LABEL, "{value}");
        assert!(long.starts_with(value.split_at(52).0), "{value}");
        let other = label_value(&format!("{long}x"));
        assert_ne!(value, other);
        // A prefix ending in `.` or `-` is trimmed: a label value ends alphanumeric before `-`.
        let dotted = format!("{}.{}", "a".repeat(51), "b".repeat(30));
        let value = label_value(&dotted);
        assert!(is_label(&value, MAX_LABEL), "{value}");
    }

    #[test]
    fn labels_and_their_spelling_fix() {
        assert!(is_label("hot-fix-1", MAX_LABEL));
        for bad in ["", "Hot_Fix", "-a", "a-", "a.b"] {
            assert!(!is_label(bad, MAX_LABEL), "{bad}");
        }
        assert!(!is_label(&"a".repeat(64), MAX_LABEL));
        assert_eq!(to_label("Hot_Fix", MAX_LABEL), "hot-fix");
        assert_eq!(to_label("--My  App--", MAX_LABEL), "my-app");
        assert_eq!(to_label("___", MAX_LABEL), "");
        assert_eq!(to_label("ab-cd", 3), "ab");
    }
}
