//! The Dray server's URL as the CLI takes it (`--server`, `DRAY_SERVER`, a saved context):
//! `http://` or `https://` and a host, checked when the command line is read. A URL without
//! a scheme is refused with the one it probably meant, rather than guessed (as kubectl).

use std::fmt;
use std::str::FromStr;

/// Why a server URL was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServerUrlError {
    /// Nothing was given.
    #[error("the server URL is empty; give one such as `http://127.0.0.1:7070`")]
    Empty,
    /// `host:port` without `http://` or `https://`.
    #[error("`{given}` has no scheme; did you mean `http://{given}`?")]
    NoScheme {
        /// What was given.
        given: String,
    },
    /// A scheme other than HTTP(S).
    #[error("`{given}` uses the scheme `{scheme}`; the Dray server speaks `http://` or `https://`")]
    Scheme {
        /// What was given.
        given: String,
        /// Its scheme.
        scheme: String,
    },
    /// Not a URL at all.
    #[error("`{given}` is not a URL ({cause}); give one such as `http://127.0.0.1:7070`")]
    Invalid {
        /// What was given.
        given: String,
        /// Why it does not parse.
        cause: String,
    },
}

/// A checked server URL, without a trailing `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerUrl(String);

impl ServerUrl {
    /// The URL as text, without a trailing `/`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ServerUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for ServerUrl {
    type Err = ServerUrlError;

    fn from_str(given: &str) -> Result<Self, Self::Err> {
        let given = given.trim();
        if given.is_empty() {
            return Err(ServerUrlError::Empty);
        }
        let Some((scheme, rest)) = given.split_once("://") else {
            return Err(ServerUrlError::NoScheme {
                given: given.to_owned(),
            });
        };
        if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
            return Err(ServerUrlError::Scheme {
                given: given.to_owned(),
                scheme: scheme.to_owned(),
            });
        }
        let url = reqwest::Url::parse(given).map_err(|e| ServerUrlError::Invalid {
            given: given.to_owned(),
            cause: e.to_string(),
        })?;
        if url.host_str().is_none_or(str::is_empty) || rest.starts_with('/') {
            return Err(ServerUrlError::Invalid {
                given: given.to_owned(),
                cause: "it names no host".into(),
            });
        }
        Ok(ServerUrl(given.trim_end_matches('/').to_owned()))
    }
}

/// clap's parser for `--server`.
pub fn parse(given: &str) -> Result<ServerUrl, ServerUrlError> {
    given.parse()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_port_without_a_scheme_is_refused_with_the_url_it_meant() {
        let error = "127.0.0.1:45413".parse::<ServerUrl>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "`127.0.0.1:45413` has no scheme; did you mean `http://127.0.0.1:45413`?"
        );
        // `localhost:7070` is a valid URL with the scheme `localhost`: refused all the same.
        assert!(matches!(
            "localhost:7070".parse::<ServerUrl>(),
            Err(ServerUrlError::NoScheme { .. })
        ));
    }

    #[test]
    fn http_and_https_urls_are_taken_without_the_trailing_slash() {
        let url: ServerUrl = "http://127.0.0.1:7070/".parse().unwrap();
        assert_eq!(url.as_str(), "http://127.0.0.1:7070");
        let url: ServerUrl = "https://dray.example.com/base".parse().unwrap();
        assert_eq!(url.as_str(), "https://dray.example.com/base");
    }

    #[test]
    fn empty_other_schemes_and_hostless_urls_are_refused() {
        assert_eq!("  ".parse::<ServerUrl>(), Err(ServerUrlError::Empty));
        assert!(matches!(
            "ftp://host".parse::<ServerUrl>(),
            Err(ServerUrlError::Scheme { .. })
        ));
        assert!(matches!(
            "http:///x".parse::<ServerUrl>(),
            Err(ServerUrlError::Invalid { .. })
        ));
    }
}
