//! What a webhook receiver's shared secret must be: at least [`MIN_BYTES`] bytes. `dray
//! apply` refuses a `webhook` Credential whose `token` or `password` is shorter (empty
//! included), and a receiver whose stored secret is shorter (stored before this rule)
//! refuses every request, so a guessable secret never authenticates. Neither ever quotes
//! the secret.

/// The fewest bytes a webhook secret may have.
pub const MIN_BYTES: usize = 16;

/// How to make a good secret, for errors and logs.
pub const HINT: &str = "generate one with `openssl rand -hex 32`, set it as the Credential's \
     `token` and in the sender's webhook settings";

/// Why a secret cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WeakSecret {
    /// The secret is empty: anyone sending an empty header would match it.
    #[error("the webhook secret is empty: a receiver needs a secret of at least {MIN_BYTES} bytes")]
    Empty,
    /// The secret is shorter than [`MIN_BYTES`].
    #[error("the webhook secret is shorter than {MIN_BYTES} bytes, too easy to guess")]
    TooShort,
}

/// Why `secret` is too weak to authenticate a webhook, if it is.
pub fn check(secret: &str) -> Option<WeakSecret> {
    if secret.is_empty() {
        Some(WeakSecret::Empty)
    } else if secret.len() < MIN_BYTES {
        Some(WeakSecret::TooShort)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sixteen_bytes_is_the_least() {
        assert_eq!(check(""), Some(WeakSecret::Empty));
        assert_eq!(check("fifteen-bytes.."), Some(WeakSecret::TooShort));
        assert_eq!(check("sixteen-bytes..."), None);
        // Bytes, not characters: eight two-byte characters are enough.
        assert_eq!(check("éééééééé"), None);
    }
}
