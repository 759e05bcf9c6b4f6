//! A small client of the OCI distribution API for the steps that move artifacts: the
//! chart pull of `helm-template`/`helm-update-chart` (`helm::oci`), `oci-download` and
//! `oci-push`.
//!
//! Owns image references ([`Reference`]: `registry/repository[:tag][@digest]`, with
//! Kargo's `oci://` prefix for Helm charts), one repository's session ([`Repository`]:
//! manifest and blob reads checked against their digests and bounded in size, blob
//! uploads, cross-repository mounts, manifest pushes, each request with a finite timeout,
//! and the `401` → Basic or Bearer-token answer), and [`OciError`]. Does not list tags nor
//! choose versions: discovery's registry client in the `dray` crate does, and this crate
//! cannot import it (docs/decisions.md).

mod client;
mod error;
mod manifest;
mod reference;

pub(crate) use client::{Access, Repository, root_cause};
pub(crate) use error::OciError;
pub(crate) use manifest::{Descriptor, Manifest, MediaKind};
pub(crate) use reference::Reference;

/// `sha256:<hex>` of `data`.
pub(crate) fn sha256(data: &[u8]) -> String {
    use sha2::Digest as _;
    hex_digest(&sha2::Sha256::digest(data))
}

/// `sha256:<hex>` of a finished hash.
pub(crate) fn hex_digest(hash: &[u8]) -> String {
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The HTTP client for `reference`: the context's, or one that skips TLS verification
/// when the step says `insecureSkipTLSVerify` (logged).
pub(crate) fn http_client(
    ctx: &crate::StepContext,
    insecure_skip_tls_verify: bool,
    reference: &Reference,
) -> Result<reqwest::Client, crate::StepOutcome> {
    if !insecure_skip_tls_verify {
        return Ok(ctx.http.clone());
    }
    ctx.log(&format!(
        "`{}`: TLS certificates are not verified (insecureSkipTLSVerify)",
        reference.repository_url()
    ));
    reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .map_err(|e| crate::StepOutcome::errored(format!("cannot build an HTTP client: {e}")))
}

/// The credentials for `reference`'s repository and the Credential type they are: `helm`
/// for an `oci://` reference (looked up as `oci://registry/repository`), else `image`
/// (as `registry/repository`), as Kargo looks them up.
pub(crate) fn credentials(
    ctx: &crate::StepContext,
    reference: &Reference,
) -> (Option<crate::GitCredentials>, &'static str) {
    let repo = reference.repository_url();
    if reference.helm {
        (ctx.credentials.helm(&format!("oci://{repo}")), "helm")
    } else {
        (ctx.credentials.image(&repo), "image")
    }
}

/// What `dray apply` can tell of the reference in `config[field]` before a run: one
/// written without `${{ }}` must parse, and with `needs_tag`, name a tag and no digest.
pub(crate) fn check_reference(
    config: &serde_json::Value,
    field: &'static str,
    needs_tag: bool,
) -> Option<crate::ConfigProblem> {
    let text = config.get(field)?.as_str()?;
    if text.contains("${{") {
        return None;
    }
    match Reference::parse(field, text) {
        Err(error) => Some(crate::ConfigProblem {
            field,
            message: error.to_string(),
            hint: "write `registry/repository:tag` or `registry/repository@sha256:…`".into(),
        }),
        Ok(reference) if needs_tag && (reference.tag.is_none() || reference.digest.is_some()) => {
            Some(crate::ConfigProblem {
                field,
                message: format!("`{text}` names no tag to push to"),
                hint: "write the destination as `registry/repository:tag`, without a digest".into(),
            })
        }
        Ok(_) => None,
    }
}
