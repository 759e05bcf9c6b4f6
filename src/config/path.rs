//! [`FieldPath`]: where a value sits inside a document, written the way users read it
//! (`spec.requestedFreight[0].sources.stages[0]`). It keys the line index built by the YAML
//! reader and names the field in every error. It knows nothing about YAML or schemas.

use std::fmt;

/// One step down into a JSON value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Segment {
    /// A member of an object.
    Key(String),
    /// An element of an array.
    Index(usize),
}

/// A path from the root of a document to one of its values.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct FieldPath(Vec<Segment>);

impl FieldPath {
    /// The document itself.
    pub(crate) fn root() -> Self {
        FieldPath(Vec::new())
    }

    /// Builds a path from object keys only, e.g. `["metadata", "name"]`.
    pub(crate) fn of(keys: &[&str]) -> Self {
        FieldPath(keys.iter().map(|k| Segment::Key((*k).to_owned())).collect())
    }

    /// The path of member `key` below this one.
    pub(crate) fn key(&self, key: &str) -> Self {
        let mut segments = self.0.clone();
        segments.push(Segment::Key(key.to_owned()));
        FieldPath(segments)
    }

    /// The path of element `index` below this one.
    pub(crate) fn index(&self, index: usize) -> Self {
        let mut segments = self.0.clone();
        segments.push(Segment::Index(index));
        FieldPath(segments)
    }

    /// This path followed by `rest`.
    pub(crate) fn join(&self, rest: &FieldPath) -> Self {
        let mut segments = self.0.clone();
        segments.extend(rest.0.iter().cloned());
        FieldPath(segments)
    }

    /// The path one level up, or `None` at the root.
    pub(crate) fn parent(&self) -> Option<Self> {
        let (_, rest) = self.0.split_last()?;
        Some(FieldPath(rest.to_vec()))
    }

    /// Whether this is the document itself.
    pub(crate) fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The last object key of the path, if the path ends in one.
    pub(crate) fn last_key(&self) -> Option<&str> {
        match self.0.last() {
            Some(Segment::Key(k)) => Some(k),
            _ => None,
        }
    }

    /// The segments, outermost first.
    pub(crate) fn segments(&self) -> &[Segment] {
        &self.0
    }

    /// Whether `other` is this path or below it.
    pub(crate) fn contains(&self, other: &FieldPath) -> bool {
        other.0.starts_with(&self.0)
    }

    /// This path with its leading `from` replaced by `to`, if it starts with `from`.
    pub(crate) fn moved(&self, from: &FieldPath, to: &FieldPath) -> Option<Self> {
        let rest = self.0.strip_prefix(from.0.as_slice())?;
        let mut segments = to.0.clone();
        segments.extend(rest.iter().cloned());
        Some(FieldPath(segments))
    }
}

impl From<&serde_path_to_error::Path> for FieldPath {
    fn from(path: &serde_path_to_error::Path) -> Self {
        use serde_path_to_error::Segment as S;
        let segments = path
            .iter()
            .filter_map(|s| match s {
                S::Seq { index } => Some(Segment::Index(*index)),
                S::Map { key } => Some(Segment::Key(key.clone())),
                S::Enum { .. } | S::Unknown => None,
            })
            .collect();
        FieldPath(segments)
    }
}

/// Whether a key can be written bare after a dot.
fn is_plain_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl fmt::Display for FieldPath {
    /// `spec.requestedFreight[0].origin`; odd keys are quoted: `metadata.labels["a.b/c"]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Index(n) => write!(f, "[{n}]")?,
                Segment::Key(k) if is_plain_key(k) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    f.write_str(k)?;
                }
                Segment::Key(k) => write!(f, "[{k:?}]")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_like_users_write_it() {
        let p = FieldPath::of(&["spec", "requestedFreight"])
            .index(0)
            .key("sources");
        assert_eq!(
            p.key("stages").index(2).to_string(),
            "spec.requestedFreight[0].sources.stages[2]"
        );
        assert_eq!(FieldPath::root().to_string(), "");
        assert_eq!(
            FieldPath::of(&["metadata", "labels", "app.kubernetes.io/name"]).to_string(),
            "metadata.labels[\"app.kubernetes.io/name\"]"
        );
    }

    #[test]
    fn parent_walks_up_to_the_root() {
        let p = FieldPath::of(&["spec"]).index(3);
        assert_eq!(p.parent(), Some(FieldPath::of(&["spec"])));
        assert_eq!(FieldPath::root().parent(), None);
        assert!(
            p.parent()
                .and_then(|p| p.parent())
                .is_some_and(|p| p.is_root())
        );
        assert_eq!(FieldPath::of(&["a", "b"]).last_key(), Some("b"));
    }
}
