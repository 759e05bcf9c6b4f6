//! Basic-auth credentials shared by the test registry and the git server.
//!
//! Owns the user/password pair and its two encodings: the `Authorization: Basic` header
//! value and a bcrypt `htpasswd` line. Does not decide who checks them: the registry reads
//! the htpasswd file itself, the git server compares headers in `git_server`.

use anyhow::{Context, Result};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// A user name and password for HTTP basic auth.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    /// The user name.
    pub username: String,
    /// The password, in clear (test secrets only).
    pub password: String,
}

impl Credentials {
    /// Credentials from a user name and a password.
    pub fn new(username: impl Into<String>, password: impl Into<String>) -> Self {
        let credentials = Self {
            username: username.into(),
            password: password.into(),
        };
        credentials.remember();
        credentials
    }

    /// Remembers the password (and the `Authorization: Basic` value carrying it) as
    /// secrets no output may show (see [`crate::secrets`]).
    pub fn remember(&self) {
        let label = format!("the basic-auth password of `{}`", self.username);
        crate::secrets::remember(label.clone(), &self.password);
        if let Some(encoded) = self.basic_header().strip_prefix("Basic ") {
            crate::secrets::remember(format!("{label} (base64)"), encoded);
        }
    }

    /// The value of an `Authorization` header: `Basic base64(user:password)`.
    pub fn basic_header(&self) -> String {
        let pair = format!("{}:{}", self.username, self.password);
        format!("Basic {}", STANDARD.encode(pair))
    }

    /// Whether an `Authorization` header value carries exactly these credentials.
    pub fn matches_header(&self, header: &str) -> bool {
        let Some(encoded) = header.strip_prefix("Basic ") else {
            return false;
        };
        let Ok(decoded) = STANDARD.decode(encoded.trim()) else {
            return false;
        };
        let expected = format!("{}:{}", self.username, self.password);
        decoded == expected.as_bytes()
    }

    /// One `htpasswd` line with a bcrypt hash, as the registry's htpasswd auth requires.
    pub fn htpasswd_line(&self) -> Result<String> {
        // Cost 5 keeps tests quick; the registry accepts any bcrypt cost.
        let hash = bcrypt::hash(&self.password, 5)
            .with_context(|| format!("Failed to hash the password of `{}`", self.username))?;
        Ok(format!("{}:{}\n", self.username, hash))
    }
}
