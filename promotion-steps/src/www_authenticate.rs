//! Reading a `WWW-Authenticate` challenge's parameters (`realm`, `service`, `scope`), as
//! OCI registries send them. Shared by the steps' chart pull and the `dray` crate's
//! registry client.

use std::collections::HashMap;

/// The `key="value"` pairs of a challenge's parameters (after the scheme), keys in lower
/// case; unquoted values end at a comma.
pub fn challenge_params(params: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut rest = params.trim();
    while let Some((key, after)) = rest.split_once('=') {
        let key = key
            .trim()
            .trim_start_matches(',')
            .trim()
            .to_ascii_lowercase();
        let (value, tail) = match after.strip_prefix('"') {
            Some(quoted) => quoted.split_once('"').unwrap_or((quoted, "")),
            None => after.split_once(',').unwrap_or((after, "")),
        };
        out.insert(key, value.to_owned());
        rest = tail.trim_start_matches(|c: char| c == ',' || c.is_whitespace());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bearer_challenges() {
        let params = challenge_params(
            r#"realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/nginx:pull""#,
        );
        assert_eq!(params["realm"], "https://auth.docker.io/token");
        assert_eq!(params["service"], "registry.docker.io");
        assert_eq!(params["scope"], "repository:library/nginx:pull");
        let params = challenge_params(r#"realm="x", error=invalid_token"#);
        assert_eq!(params["error"], "invalid_token");
    }
}
