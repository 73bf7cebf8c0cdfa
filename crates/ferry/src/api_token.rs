//! Where the client commands find the token a node's API asks for (`daemon::api_guard`).
//!
//! The token lives in the node's data directory (`api-token`, mode 0600). A client is given
//! only the API's address, so `ferry node` (and `ferry demo --api`) also leave a copy under the
//! user's runtime directory, named by the API's port and network namespace (the same port in
//! two namespaces is two APIs): `$XDG_RUNTIME_DIR/ferry/api-tokens/<netns>-<port>` (without
//! `XDG_RUNTIME_DIR`, under the default data directory). Both are the user's alone, so
//! any program of the node's user finds the token and no one else's does.
//!
//! A client looks, in order: `FERRY_API_TOKEN`; the copy for the address's port; the default
//! data directory's `api-token` (a node started without `--data-dir`).

use std::fs;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;

use anyhow::Context as _;

/// The environment variable that overrides every file.
pub(crate) const TOKEN_ENV: &str = "FERRY_API_TOKEN";

/// The directory of the per-port copies.
fn copies_dir() -> Option<PathBuf> {
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    match runtime {
        Some(dir) => Some(dir.join("ferry").join("api-tokens")),
        None => default_data_dir().map(|d| d.join("api-tokens")),
    }
}

/// The name of the copy for `port`: the network namespace's inode number (Linux names it in
/// `/proc/self/ns/net` as `net:[4026531840]`; 0 where it cannot be read) and the port.
fn copy_name(port: u16) -> String {
    let netns = fs::read_link("/proc/self/ns/net")
        .ok()
        .and_then(|l| {
            let l = l.to_string_lossy().into_owned();
            l.split(['[', ']']).nth(1).map(str::to_owned)
        })
        .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        .unwrap_or_else(|| "0".into());
    format!("{netns}-{port}")
}

fn default_data_dir() -> Option<PathBuf> {
    let xdg = std::env::var_os("XDG_DATA_HOME");
    let home = std::env::var_os("HOME");
    store::default_data_dir(xdg.as_deref(), home.as_deref())
}

/// Leaves a copy of `token` for the API on `port`, readable by this user only.
pub(crate) fn publish(port: u16, token: &str) -> anyhow::Result<PathBuf> {
    let dir = copies_dir().context("no XDG_RUNTIME_DIR, XDG_DATA_HOME or HOME to keep it in")?;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    let name = copy_name(port);
    let path = dir.join(&name);
    // Written aside and renamed, so a client never reads half a token.
    let tmp = dir.join(format!(".{name}.{}", std::process::id()));
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("creating {}", tmp.display()))?;
    file.set_permissions(fs::Permissions::from_mode(0o600))?;
    file.write_all(format!("{token}\n").as_bytes())?;
    drop(file);
    fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// The token for the API at `api` (`host:port` or `http://host:port/`), if one is found.
pub(crate) fn find(api: &str) -> Option<String> {
    if let Ok(token) = std::env::var(TOKEN_ENV)
        && !token.trim().is_empty()
    {
        return Some(token.trim().to_owned());
    }
    let port = api
        .trim_end_matches('/')
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse::<u16>().ok());
    let copy = port.and_then(|p| Some(copies_dir()?.join(copy_name(p))));
    let own = default_data_dir().map(|d| d.join(daemon::api_guard::TOKEN_FILE));
    [copy, own]
        .into_iter()
        .flatten()
        .find_map(|path| fs::read_to_string(path).ok())
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
}
