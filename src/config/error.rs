//! The errors the loader reports: [`ConfigError`] (one problem, located by file, document,
//! line and field, with a hint) and [`ConfigErrors`] (all of them). Also [`Issue`], the
//! location-free form that the individual checks produce before the loader places them.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::path::FieldPath;

/// One problem in the configuration, located as precisely as the loader could.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigError {
    /// The file, as given (or found in a directory).
    pub file: String,
    /// The document in the file, counting from 1 (`---` separates documents).
    pub document: Option<usize>,
    /// The document's `kind`, when it is known.
    pub kind: Option<String>,
    /// The document's name when it is known: `project/name` for kinds that live in a
    /// project (as in `Stage demo/dev`), else `metadata.name`.
    pub name: Option<String>,
    /// The line (1-based) of the offending field or value, else of the document's start.
    pub line: Option<usize>,
    /// The offending field, e.g. `spec.requestedFreight[0].sources.stages[0]`.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
    /// What to do about it.
    pub hint: Option<String>,
}

impl ConfigError {
    /// An error about a whole file (it cannot be read, or is not YAML).
    pub fn file(file: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            file: file.into(),
            document: None,
            kind: None,
            name: None,
            line: None,
            field: None,
            message: message.into(),
            hint: None,
        }
    }

    /// The same error with a hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

impl fmt::Display for ConfigError {
    /// `file:line: document 2 (Stage demo/staging): field: message`, then `  hint: …`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        f.write_str(":")?;
        if let Some(document) = self.document {
            write!(f, " document {document}")?;
            if let Some(kind) = &self.kind {
                match &self.name {
                    Some(name) => write!(f, " ({kind} {name})")?,
                    None => write!(f, " ({kind})")?,
                }
            }
            f.write_str(":")?;
        }
        if let Some(field) = self.field.as_deref().filter(|s| !s.is_empty()) {
            write!(f, " {field}:")?;
        }
        write!(f, " {}", self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, "\n  hint: {hint}")?;
        }
        Ok(())
    }
}

/// Every problem found in a batch of configuration, in file and line order.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, thiserror::Error)]
#[serde(transparent)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    /// One entry per error, each followed by its hint line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

/// A problem found by one check, before the loader adds file, document and line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Issue {
    /// The offending field; the root means the document as a whole.
    pub(crate) path: FieldPath,
    /// The line, when the check knows it better than the path does.
    pub(crate) line: Option<usize>,
    /// What is wrong.
    pub(crate) message: String,
    /// What to do about it.
    pub(crate) hint: Option<String>,
}

impl Issue {
    /// An issue at `path`.
    pub(crate) fn new(path: FieldPath, message: impl Into<String>) -> Self {
        Issue {
            path,
            line: None,
            message: message.into(),
            hint: None,
        }
    }

    /// The same issue with a hint.
    pub(crate) fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// The same issue at a known line.
    pub(crate) fn at_line(mut self, line: usize) -> Self {
        self.line = Some(line);
        self
    }

    /// The same issue with a hint, if there is one.
    pub(crate) fn maybe_hint(mut self, hint: Option<String>) -> Self {
        self.hint = hint;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn located() -> ConfigError {
        ConfigError {
            file: "examples/bad.yaml".into(),
            document: Some(2),
            kind: Some("Stage".into()),
            name: Some("demo/staging".into()),
            line: Some(14),
            field: Some("spec.requestedFreight[0].sources.stages[0]".into()),
            message: "upstream stage `qa` does not exist in project `demo`".into(),
            hint: Some("define a Stage named `qa`, or use one of: `dev`".into()),
        }
    }

    #[test]
    fn displays_location_field_message_and_hint() {
        assert_eq!(
            located().to_string(),
            "examples/bad.yaml:14: document 2 (Stage demo/staging): \
             spec.requestedFreight[0].sources.stages[0]: upstream stage `qa` does not exist \
             in project `demo`\n  hint: define a Stage named `qa`, or use one of: `dev`"
        );
    }

    #[test]
    fn displays_file_errors_briefly() {
        let e = ConfigError::file("x.yaml", "cannot read `x.yaml`: denied");
        assert_eq!(e.to_string(), "x.yaml: cannot read `x.yaml`: denied");
    }

    #[test]
    fn lists_all_errors_and_serializes_as_an_array() {
        let errors = ConfigErrors(vec![located(), ConfigError::file("y.yaml", "boom")]);
        let text = errors.to_string();
        assert_eq!(text.lines().count(), 3);
        assert!(text.ends_with("y.yaml: boom"));
        let json = serde_json::to_value(&errors).unwrap();
        assert_eq!(json[0]["line"], 14);
        assert_eq!(
            json[0]["field"],
            "spec.requestedFreight[0].sources.stages[0]"
        );
        assert_eq!(json[1]["document"], serde_json::Value::Null);
    }
}
