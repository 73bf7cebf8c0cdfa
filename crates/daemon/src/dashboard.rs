//! The web dashboard: a page every node serves at `/` on its API address, with its assets
//! (`crates/daemon/dashboard/`) built into the binary, so it works in the field with no
//! internet: nothing is loaded from anywhere but the node.
//!
//! The page is plain HTML, CSS and JavaScript that reads the same `/v1/...` routes as every
//! other client, so it shows nothing the API does not, and it needs the token like every other
//! client: the assets carry no secret and are served without it (still behind the Host and
//! Origin checks of [`crate::api_guard`]), and the page asks for the token (`ferry dashboard`
//! prints the page's address with the token in its fragment, `#token=…`, which browsers never
//! send to a server; the page moves it to the tab's session storage and out of the address).
//! A browser cannot give a WebSocket an `Authorization` header, so the guard also takes the
//! token as a WebSocket subprotocol, [`WS_TOKEN_PREFIX`]`<token>`, offered beside
//! [`WS_PROTOCOL`], which is the one every WebSocket route picks: the token is never echoed,
//! and never put in a query string (which servers and proxies log).
//!
//! Every asset is answered with a strict Content-Security-Policy (its own origin only, no
//! inline script or style, no framing), `X-Content-Type-Options: nosniff` and
//! `Referrer-Policy: no-referrer`. The page writes data into the document as text nodes only:
//! node ids, procedure names and results come from other nodes.

use axum::extract::Path;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use crate::control::ApiError;

/// The subprotocol the API picks for a WebSocket that offers it: the dashboard offers it with
/// its token ([`WS_TOKEN_PREFIX`]).
pub const WS_PROTOCOL: &str = "ferry";
/// A WebSocket subprotocol of this prefix carries the API token (`ferry-token.<token>`).
pub const WS_TOKEN_PREFIX: &str = "ferry-token.";

/// The Content-Security-Policy of every asset: scripts, styles, images and connections
/// (`fetch`, same-origin WebSockets) from the node only; no plugins, no framing, no form posts
/// elsewhere, no `<base>`.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
                       img-src 'self' data:; connect-src 'self'; object-src 'none'; \
                       base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The assets: name under `/dashboard/`, content type, bytes. `index.html` is also `/`.
const ASSETS: &[(&str, &str, &[u8])] = &[
    (
        "index.html",
        "text/html; charset=utf-8",
        include_bytes!("../dashboard/index.html"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../dashboard/app.js"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_bytes!("../dashboard/style.css"),
    ),
    (
        "icon.svg",
        "image/svg+xml",
        include_bytes!("../dashboard/icon.svg"),
    ),
];

/// Whether `path` is one of the dashboard's routes, which the guard serves without the token.
pub fn is_asset_path(path: &str) -> bool {
    path == "/" || path.starts_with("/dashboard/")
}

/// `GET /`: the page.
pub async fn index() -> Response {
    serve("index.html")
}

/// `GET /dashboard/{file}`: one asset.
pub async fn asset(Path(file): Path<String>) -> Response {
    serve(&file)
}

fn serve(name: &str) -> Response {
    let Some((_, content_type, bytes)) = ASSETS.iter().find(|(n, _, _)| *n == name) else {
        return ApiError::new("not_found", format!("the dashboard has no file {name:?}"))
            .into_response();
    };
    let mut response = (*bytes).into_response();
    let headers = response.headers_mut();
    let fixed = |v: &'static str| HeaderValue::from_static(v);
    headers.insert(header::CONTENT_TYPE, fixed(content_type));
    headers.insert(header::CONTENT_SECURITY_POLICY, fixed(CSP));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, fixed("nosniff"));
    headers.insert(header::X_FRAME_OPTIONS, fixed("DENY"));
    headers.insert(header::REFERRER_POLICY, fixed("no-referrer"));
    headers.insert("cross-origin-opener-policy", fixed("same-origin"));
    headers.insert("cross-origin-resource-policy", fixed("same-origin"));
    // Small, and must change with the binary: revalidate every time.
    headers.insert(header::CACHE_CONTROL, fixed("no-cache"));
    response
}

/// The API token among a WebSocket upgrade's offered subprotocols, if one carries it.
pub fn token_from_protocols(offered: &str) -> Option<&str> {
    offered
        .split(',')
        .map(str::trim)
        .find_map(|p| p.strip_prefix(WS_TOKEN_PREFIX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_found_among_offered_protocols() {
        assert_eq!(token_from_protocols("ferry, ferry-token.abc"), Some("abc"));
        assert_eq!(token_from_protocols("ferry-token.x,ferry"), Some("x"));
        assert_eq!(token_from_protocols("ferry"), None);
        assert_eq!(token_from_protocols(""), None);
    }

    #[test]
    fn every_asset_is_served_with_its_type_and_the_policy() {
        for (name, content_type, _) in ASSETS {
            let r = serve(name);
            assert_eq!(r.status(), 200, "{name}");
            assert_eq!(r.headers()[header::CONTENT_TYPE], *content_type);
            assert_eq!(r.headers()[header::CONTENT_SECURITY_POLICY], CSP);
        }
        assert_eq!(serve("../Cargo.toml").status(), 404);
    }
}
