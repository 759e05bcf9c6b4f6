//! Freight and Stage metadata: the key → JSON value map a promotion's `set-metadata` step
//! records on a Freight's or a Stage's status (Kargo's `status.metadata`), and its limits.
//!
//! One rule for every writer: a key is 1–[`MAX_METADATA_KEY`] letters, digits, `-`, `_` and
//! `.`, starting with a letter or digit; one value is at most [`MAX_METADATA_VALUE_BYTES`]
//! of JSON; a resource holds at most [`MAX_METADATA_KEYS`] keys. A refusal names the key
//! and says what to do.

use std::collections::BTreeMap;

/// A resource's metadata: key → any JSON value.
pub type Metadata = BTreeMap<String, serde_json::Value>;

/// The longest metadata key.
pub const MAX_METADATA_KEY: usize = 63;
/// The most JSON one metadata value may take, in bytes.
pub const MAX_METADATA_VALUE_BYTES: usize = 16 * 1024;
/// The most keys one Freight or Stage may hold.
pub const MAX_METADATA_KEYS: usize = 64;

/// Why metadata cannot be recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetadataLimitError {
    /// The key is empty, too long or has characters other than letters, digits, `-`, `_`, `.`.
    #[error(
        "metadata key `{key}` is not valid: use 1–{MAX_METADATA_KEY} letters, digits, `-`, `_` \
         and `.`, starting with a letter or digit (e.g. `deployedBy`)"
    )]
    Key {
        /// The key.
        key: String,
    },
    /// The value's JSON is larger than [`MAX_METADATA_VALUE_BYTES`].
    #[error(
        "metadata key `{key}`: its value is {bytes} bytes of JSON, more than the \
         {MAX_METADATA_VALUE_BYTES} allowed; keep large data in git or an artifact and record \
         a reference to it"
    )]
    ValueTooLarge {
        /// The key.
        key: String,
        /// The value's size.
        bytes: usize,
    },
    /// The resource would hold more than [`MAX_METADATA_KEYS`] keys.
    #[error(
        "metadata key `{key}` would be key number {count}, more than the {MAX_METADATA_KEYS} one \
         resource may hold; group values under fewer keys (a key's value may be an object), or \
         remove keys by setting them to null"
    )]
    TooManyKeys {
        /// The first key beyond the limit.
        key: String,
        /// How many keys there would be.
        count: usize,
    },
}

/// Checks one key and its value against the limits.
pub fn check_metadata_entry(
    key: &str,
    value: &serde_json::Value,
) -> Result<(), MetadataLimitError> {
    let valid_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let starts_well = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric());
    if !starts_well || key.len() > MAX_METADATA_KEY || !key.chars().all(valid_char) {
        return Err(MetadataLimitError::Key {
            key: key.to_owned(),
        });
    }
    let bytes = serde_json::to_vec(value).map_or(usize::MAX, |json| json.len());
    if bytes > MAX_METADATA_VALUE_BYTES {
        return Err(MetadataLimitError::ValueTooLarge {
            key: key.to_owned(),
            bytes,
        });
    }
    Ok(())
}

/// `values` merged into `metadata`: each key set to its value, a `null` value removing the
/// key. Nothing changes when a key or value breaks a limit.
pub fn merge_metadata(
    metadata: &mut Metadata,
    values: &serde_json::Map<String, serde_json::Value>,
) -> Result<(), MetadataLimitError> {
    let mut merged = metadata.clone();
    for (key, value) in values {
        check_metadata_entry(key, value)?;
        if value.is_null() {
            merged.remove(key);
        } else {
            merged.insert(key.clone(), value.clone());
            if merged.len() > MAX_METADATA_KEYS {
                return Err(MetadataLimitError::TooManyKeys {
                    key: key.clone(),
                    count: merged.len(),
                });
            }
        }
    }
    *metadata = merged;
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn keys_are_checked_and_named() {
        for good in ["deployedBy", "a", "build.number", "x_y-z", "9lives"] {
            assert!(check_metadata_entry(good, &json!(1)).is_ok(), "{good}");
        }
        for bad in ["", "-a", ".a", "a b", "a/b", "ключ"] {
            let err = check_metadata_entry(bad, &json!(1)).unwrap_err();
            assert!(err.to_string().contains(&format!("`{bad}`")), "{err}");
        }
        assert!(check_metadata_entry(&"k".repeat(MAX_METADATA_KEY + 1), &json!(1)).is_err());
    }

    #[test]
    fn values_are_bounded() {
        let big = json!("x".repeat(MAX_METADATA_VALUE_BYTES));
        let err = check_metadata_entry("notes", &big).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("metadata key `notes`: its value is 16386 bytes"),
            "{err}"
        );
    }

    #[test]
    fn merging_sets_removes_and_refuses_as_a_whole() {
        let mut metadata = Metadata::from([("old".to_owned(), json!(1))]);
        let values = json!({"a": {"b": [1, 2]}, "old": null});
        merge_metadata(&mut metadata, values.as_object().unwrap()).unwrap();
        assert_eq!(
            metadata,
            Metadata::from([("a".to_owned(), json!({"b": [1, 2]}))])
        );
        let bad = json!({"c": 1, "bad key": 2});
        assert!(merge_metadata(&mut metadata, bad.as_object().unwrap()).is_err());
        assert!(
            !metadata.contains_key("c"),
            "a refused merge changes nothing"
        );
        let many: serde_json::Map<_, _> = (0..=MAX_METADATA_KEYS)
            .map(|i| (format!("k{i}"), json!(i)))
            .collect();
        let err = merge_metadata(&mut Metadata::new(), &many).unwrap_err();
        assert!(
            matches!(err, MetadataLimitError::TooManyKeys { .. }),
            "{err}"
        );
    }
}
