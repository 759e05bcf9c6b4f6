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

#[cfg(test)]
mod tests {
    use super::*;

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
