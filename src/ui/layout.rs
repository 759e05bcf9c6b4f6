//! The page shell every UI page shares (head, header with the user and a logout button),
//! the embedded assets, and the security headers on every UI response.

use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderName};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};

use super::Viewer;

const APP_CSS: &str = include_str!("assets/app.css");
const APP_JS: &str = include_str!("assets/app.js");

/// A whole page: `title`, the signed-in `viewer` (none on the login page), the project
/// it belongs to (for the live-update stream), and its body.
pub(crate) fn page(
    title: &str,
    viewer: Option<&Viewer>,
    project: Option<&str>,
    body: Markup,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                @if let Some(v) = viewer {
                    meta name="csrf-token" content=(v.csrf);
                }
                title { (title) " · Dray" }
                link rel="stylesheet" href="/ui/assets/app.css";
                script src="/ui/assets/app.js" defer {}
            }
            body data-project=[project] {
                header.top {
                    a.brand href="/" { "Dray" }
                    @if let Some(p) = project {
                        span.crumb { "/ " a href={ "/projects/" (p) } { (p) } }
                    }
                    @if let Some(v) = viewer {
                        span.who { "you are " strong #user { (v.caller.user) } }
                        @if v.logged_in {
                            form.logout method="post" action="/logout" {
                                input type="hidden" name="csrf" value=(v.csrf);
                                button #logout type="submit" { "Log out" }
                            }
                        }
                    }
                }
                main { (body) }
            }
        }
    }
}

/// An error as a page.
pub(crate) fn error_page(status: StatusCode, message: &str) -> Markup {
    page(
        status.canonical_reason().unwrap_or("Error"),
        None,
        None,
        html! {
            section.error {
                h1 { (status.as_u16()) " " (status.canonical_reason().unwrap_or("")) }
                pre.message { (message) }
                p { a href="/" { "Back to the projects" } }
            }
        },
    )
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

/// `GET /ui/assets/app.css`.
pub(crate) async fn css() -> Response {
    asset("text/css; charset=utf-8", APP_CSS)
}

/// `GET /ui/assets/app.js`.
pub(crate) async fn js() -> Response {
    asset("text/javascript; charset=utf-8", APP_JS)
}

/// Scripts only from this server (none inline), no framing (a Promote button must not be
/// clickjacked), no sniffing, no referrer leaking project names.
pub(crate) async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        (
            "content-security-policy",
            "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
        ),
        ("x-frame-options", "DENY"),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "same-origin"),
    ] {
        headers.insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    response
}
