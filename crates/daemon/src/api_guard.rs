//! Who may use the local API: the node's user, not a web page and not a stranger.
//!
//! The API can send bundles and make calls signed with the node's key, so "listens on
//! 127.0.0.1" is not enough: any web page the user opens can send requests to localhost (a form
//! posting `text/plain`, a WebSocket), a page on a name the attacker controls can be rebound to
//! 127.0.0.1 (DNS rebinding), and every local user can connect. Every request therefore passes,
//! in order:
//!
//! 1. **Host**: an IP literal, `localhost`, or a name listed in `api.allowed_hosts`. A rebound
//!    name (`Host: attacker.example`) is refused (`forbidden_host`, 403).
//! 2. **Origin**: absent (programs send none), or the API's own origin `http://<Host>`. A page of
//!    another origin is refused (`forbidden_origin`, 403), WebSocket upgrades included.
//! 3. **Token**: `Authorization: Bearer <token>`, the token being the contents of
//!    `<data_dir>/api-token` (64 hex digits, created at first start with mode 0600; refused if
//!    others may read it). Without it: `unauthorized`, 401. Compared in constant time.
//! 4. **Body**: a declared `Content-Length` above the route's limit is refused at once
//!    (`payload_too_large`, 413) without reading a byte (a body without one is held to the
//!    same limit as it streams in, [`crate::api_body`]); a body that is not JSON where JSON is
//!    expected (`text/plain` included) is refused (`unsupported_media_type`, 415); a body that
//!    stalls for [`BODY_IDLE`] ends the request.
//!
//! The dashboard ([`crate::dashboard`]) is served by this API, so it is same-origin, and passes
//! the same checks with two differences: its assets (`GET /`, `GET /dashboard/…`) need no
//! token (they hold no secret; the page asks for the token), and a WebSocket upgrade without an
//! `Authorization` header may carry the token as the subprotocol `ferry-token.<token>`, since a
//! browser cannot set headers on a WebSocket. Host and Origin are checked for both alike, so
//! another web page, or a rebound name, gets neither the page's data nor a socket.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::net::IpAddr;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::api_body::{Bodies, RAW_ROUTE};
use crate::control::ApiError;
use crate::dashboard;
use crate::error::{IoContext as _, StartError};

/// The token file's name in the data directory.
pub const TOKEN_FILE: &str = "api-token";
/// A request body that sends nothing for this long is given up.
pub const BODY_IDLE: Duration = Duration::from_secs(30);

/// What a request must show, shared by every request.
#[derive(Debug, Clone)]
pub struct Guard(Arc<GuardInner>);

#[derive(Debug)]
struct GuardInner {
    token: String,
    allowed_hosts: Vec<String>,
    /// The bodies' limits, and their counters.
    bodies: Bodies,
}

impl Guard {
    /// A guard for `token`, accepting `allowed_hosts` besides IP literals and `localhost`, and
    /// bodies within the limits of `bodies`.
    pub fn new(token: String, allowed_hosts: Vec<String>, bodies: Bodies) -> Self {
        Self(Arc::new(GuardInner {
            token,
            allowed_hosts: allowed_hosts
                .into_iter()
                .map(|h| h.to_ascii_lowercase())
                .collect(),
            bodies,
        }))
    }

    fn check(&self, method: &Method, path: &str, headers: &HeaderMap) -> Result<(), ApiError> {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        if !self.host_allowed(host) {
            return Err(ApiError::new(
                "forbidden_host",
                format!(
                    "the API does not answer to the host name {host:?}: use an IP address or \
                     localhost, or list the name in api.allowed_hosts"
                ),
            ));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let same = origin
                .to_str()
                .is_ok_and(|o| o.eq_ignore_ascii_case(&format!("http://{host}")));
            if !same {
                return Err(ApiError::new(
                    "forbidden_origin",
                    "requests from web pages of other origins are refused",
                ));
            }
        }
        // The dashboard's assets carry no secret: the page asks for the token itself.
        let asset = matches!(*method, Method::GET | Method::HEAD) && dashboard::is_asset_path(path);
        let presented = match headers.get(header::AUTHORIZATION) {
            Some(v) => v
                .to_str()
                .ok()
                .and_then(|v| v.strip_prefix("Bearer "))
                .unwrap_or(""),
            // A browser cannot give a WebSocket a header: the dashboard offers the token as a
            // subprotocol instead (never in the query string, which logs keep).
            None if is_websocket_upgrade(headers) => headers
                .get(header::SEC_WEBSOCKET_PROTOCOL)
                .and_then(|v| v.to_str().ok())
                .and_then(dashboard::token_from_protocols)
                .unwrap_or(""),
            None => "",
        };
        if !asset && !bool::from(presented.as_bytes().ct_eq(self.0.token.as_bytes())) {
            return Err(ApiError::new(
                "unauthorized",
                format!(
                    "this API needs the node's token: `Authorization: Bearer <token>`, the token \
                     being the contents of <data_dir>/{TOKEN_FILE} (the ferry commands find it \
                     themselves when run by the node's user, or read FERRY_API_TOKEN)"
                ),
            ));
        }
        let raw = path == RAW_ROUTE;
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        // A body without a declared length is held to the same limit as it streams in
        // (`Bodies::read`).
        if let Some(len) = declared.filter(|&n| n > self.0.bodies.limit(path)) {
            return Err(self.0.bodies.too_large(path, Some(len)));
        }
        let has_body =
            declared.is_some_and(|n| n > 0) || headers.contains_key(header::TRANSFER_ENCODING);
        if has_body && !raw && matches!(*method, Method::POST | Method::PUT | Method::PATCH) {
            let json = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.split(';').next())
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"));
            if !json {
                return Err(ApiError::new(
                    "unsupported_media_type",
                    "this route takes a JSON body: Content-Type: application/json",
                ));
            }
        }
        Ok(())
    }

    /// IP literals cannot be rebound; `localhost` resolves on this host; other names only if
    /// the operator listed them.
    fn host_allowed(&self, host: &str) -> bool {
        let name = match host.strip_prefix('[') {
            // [v6]:port
            Some(rest) => {
                return rest
                    .split(']')
                    .next()
                    .is_some_and(|ip| ip.parse::<IpAddr>().is_ok());
            }
            None => host.rsplit_once(':').map_or(host, |(name, _)| name),
        };
        if name.parse::<IpAddr>().is_ok() || name.eq_ignore_ascii_case("localhost") {
            return true;
        }
        let name = name.to_ascii_lowercase();
        self.0.allowed_hosts.contains(&name)
    }
}

/// Whether the request asks to become a WebSocket (`Upgrade: websocket`).
fn is_websocket_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// The middleware: a request that fails a check gets its error, and the route never runs.
pub async fn guard(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    match guard.check(request.method(), request.uri().path(), request.headers()) {
        Ok(()) => next.run(request).await,
        Err(e) => {
            let unauthorized = e.code == "unauthorized";
            let mut response = e.into_response();
            if unauthorized {
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    header::HeaderValue::from_static("Bearer"),
                );
            }
            response
        }
    }
}

/// The node's API token from `<data_dir>/api-token`, created (32 random bytes as 64 hex digits,
/// mode 0600) if missing. A file that others may read is refused: they could use the node.
pub fn load_or_create_token(data_dir: &Path) -> Result<String, StartError> {
    let path = data_dir.join(TOKEN_FILE);
    match File::open(&path) {
        Ok(mut file) => {
            let mode = file
                .metadata()
                .doing(|| format!("reading {}", path.display()))?
                .permissions()
                .mode()
                & 0o7777;
            if mode & 0o077 != 0 {
                return Err(StartError::File(format!(
                    "{} may be read by others (mode {mode:04o}); make it private with `chmod 600 {}`",
                    path.display(),
                    path.display()
                )));
            }
            let mut text = String::new();
            file.read_to_string(&mut text)
                .doing(|| format!("reading {}", path.display()))?;
            let token = text.trim();
            if token.len() < 32 || !token.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(StartError::File(format!(
                    "{} does not hold a token (at least 32 printable characters); delete it and a new one is made",
                    path.display()
                )));
            }
            Ok(token.to_owned())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut bytes = [0u8; 32];
            getrandom::getrandom(&mut bytes).map_err(|error| StartError::Random {
                what: "an API token",
                error,
            })?;
            let token = wire::hex(&bytes);
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .doing(|| format!("creating {}", path.display()))?;
            file.set_permissions(fs::Permissions::from_mode(0o600))
                .and_then(|()| file.write_all(format!("{token}\n").as_bytes()))
                .and_then(|()| file.sync_all())
                .doing(|| format!("writing {}", path.display()))?;
            Ok(token)
        }
        Err(e) => Err(e).doing(|| format!("opening {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    fn code(guard: &Guard, method: Method, path: &str, pairs: &[(&'static str, &str)]) -> String {
        match guard.check(&method, path, &headers(pairs)) {
            Ok(()) => "ok".into(),
            Err(e) => e.code.to_string(),
        }
    }

    const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn each_check_refuses_with_its_own_code() {
        let bodies = Bodies::new(1000, 1);
        let g = Guard::new(TOKEN.into(), vec!["Ferry.Local".into()], bodies.clone());
        let auth = format!("Bearer {TOKEN}");
        let ok = |host: &'static str| vec![("host", host), ("authorization", auth.as_str())];
        assert_eq!(
            code(&g, Method::GET, "/v1/status", &ok("127.0.0.1:4550")),
            "ok"
        );
        assert_eq!(
            code(&g, Method::GET, "/v1/status", &ok("localhost:4550")),
            "ok"
        );
        assert_eq!(code(&g, Method::GET, "/v1/status", &ok("[::1]:4550")), "ok");
        assert_eq!(
            code(&g, Method::GET, "/v1/status", &ok("ferry.local:4550")),
            "ok"
        );
        // DNS rebinding: a name the attacker controls, now pointing at 127.0.0.1.
        assert_eq!(
            code(&g, Method::GET, "/v1/status", &ok("attacker.example:4550")),
            "forbidden_host"
        );
        assert_eq!(
            code(&g, Method::GET, "/v1/status", &ok("")),
            "forbidden_host"
        );
        // A web page of another origin, even with a good host.
        let mut evil = ok("127.0.0.1:4550");
        evil.push(("origin", "http://evil.example"));
        assert_eq!(
            code(&g, Method::GET, "/v1/status", &evil),
            "forbidden_origin"
        );
        let mut same = ok("127.0.0.1:4550");
        same.push(("origin", "http://127.0.0.1:4550"));
        assert_eq!(code(&g, Method::GET, "/v1/status", &same), "ok");
        // No token, a wrong one, one of another length.
        let host = [("host", "127.0.0.1:4550")];
        assert_eq!(code(&g, Method::GET, "/v1/status", &host), "unauthorized");
        for bad in [&TOKEN[1..], "x", &format!("{TOKEN}0")] {
            let wrong = format!("Bearer {bad}");
            let h = [
                ("host", "127.0.0.1:4550"),
                ("authorization", wrong.as_str()),
            ];
            assert_eq!(code(&g, Method::GET, "/v1/status", &h), "unauthorized");
        }
        // The dashboard's assets without a token, but not from a rebound name or another page.
        assert_eq!(code(&g, Method::GET, "/", &host), "ok");
        assert_eq!(code(&g, Method::GET, "/dashboard/app.js", &host), "ok");
        assert_eq!(code(&g, Method::POST, "/", &host), "unauthorized");
        assert_eq!(
            code(&g, Method::GET, "/", &[("host", "attacker.example:4550")]),
            "forbidden_host"
        );
        assert_eq!(
            code(
                &g,
                Method::GET,
                "/dashboard/app.js",
                &[
                    ("host", "127.0.0.1:4550"),
                    ("origin", "http://evil.example")
                ]
            ),
            "forbidden_origin"
        );
        // The token as a WebSocket subprotocol: only on an upgrade, and only the right one.
        let offered = format!("ferry, ferry-token.{TOKEN}");
        let upgrade = |protocols: &str| {
            code(
                &g,
                Method::GET,
                "/v1/calls/x/watch",
                &[
                    ("host", "127.0.0.1:4550"),
                    ("origin", "http://127.0.0.1:4550"),
                    ("upgrade", "websocket"),
                    ("sec-websocket-protocol", protocols),
                ],
            )
        };
        assert_eq!(upgrade(&offered), "ok");
        assert_eq!(upgrade("ferry, ferry-token.0123"), "unauthorized");
        assert_eq!(upgrade("ferry"), "unauthorized");
        assert_eq!(
            code(
                &g,
                Method::GET,
                "/v1/status",
                &[
                    ("host", "127.0.0.1:4550"),
                    ("sec-websocket-protocol", &offered)
                ]
            ),
            "unauthorized",
            "not without an upgrade"
        );

        // Bodies: JSON only, within the limit declared before anything is read.
        let mut text_plain = ok("127.0.0.1:4550");
        text_plain.extend([("content-type", "text/plain"), ("content-length", "10")]);
        assert_eq!(
            code(&g, Method::POST, "/v1/calls", &text_plain),
            "unsupported_media_type"
        );
        let mut json = ok("127.0.0.1:4550");
        json.extend([
            ("content-type", "application/json; charset=utf-8"),
            ("content-length", "10"),
        ]);
        assert_eq!(code(&g, Method::POST, "/v1/calls", &json), "ok");
        let mut huge = ok("127.0.0.1:4550");
        huge.extend([
            ("content-type", "application/octet-stream"),
            ("content-length", "10000000000"),
        ]);
        assert_eq!(
            code(&g, Method::POST, "/v1/bundles/raw", &huge),
            "payload_too_large"
        );
        assert_eq!(bodies.refused_too_large(), 1, "the refusal is counted");
        let mut raw = ok("127.0.0.1:4550");
        raw.extend([
            ("content-type", "application/octet-stream"),
            ("content-length", "1000"),
        ]);
        assert_eq!(code(&g, Method::POST, "/v1/bundles/raw", &raw), "ok");
    }

    #[test]
    fn the_token_file_is_made_private_once_and_refused_when_others_may_read_it() {
        let dir = std::env::temp_dir().join(format!("ferry-token-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let token = load_or_create_token(&dir).unwrap();
        assert_eq!(token.len(), 64);
        let path = dir.join(TOKEN_FILE);
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            load_or_create_token(&dir).unwrap(),
            token,
            "kept across starts"
        );
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let err = load_or_create_token(&dir).unwrap_err().to_string();
        assert!(err.contains("may be read by others"), "{err}");
        let _ = fs::remove_dir_all(&dir);
    }
}
