//! `[tcpcl.tls]` read from disk: the node's certificate chain, its private key and the roots
//! peers must chain to, made into a [`cla::tls::TlsContext`]. Every error names the file at
//! fault. The key file is refused if anyone but its owner may read it (as the identity file is).

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::sync::Arc;

use cla::tls::{TlsContext, TlsError};
use wire::Eid;

use crate::config::TlsConfig;
use crate::error::{IoContext as _, StartError};

/// Reads the files of `[tcpcl.tls]` and checks that the certificate names `node_id`.
pub fn load(config: &TlsConfig, node_id: &Eid) -> Result<Arc<TlsContext>, StartError> {
    let read = |path: &Path, what: &str| {
        std::fs::read(path).doing(|| format!("tcpcl.tls.{what}: cannot read {}", path.display()))
    };
    let chain = read(&config.cert, "cert")?;
    let meta = std::fs::metadata(&config.key)
        .doing(|| format!("tcpcl.tls.key: cannot read {}", config.key.display()))?;
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(StartError::File(format!(
            "tcpcl.tls.key: {} may be read by others (mode {mode:04o}); make it private with \
             `chmod 600 {}`",
            config.key.display(),
            config.key.display()
        )));
    }
    let key = read(&config.key, "key")?;
    let roots = read(&config.ca, "ca")?;
    let context = TlsContext::from_pem(&chain, &key, &roots).map_err(|e| {
        let file = match &e {
            TlsError::Certificate(_) => &config.cert,
            TlsError::Key(_) => &config.key,
            _ => &config.ca,
        };
        StartError::Config(format!("{}: {e}", file.display()))
    })?;
    let id = node_id.to_string();
    if !context.node_ids().contains(&id) {
        return Err(StartError::Config(format!(
            "{}: the certificate's URI names are [{}], not this node's id {id} (RFC 9174 §4.4.1: \
             peers authenticate the node id by it)",
            config.cert.display(),
            context.node_ids().join(", ")
        )));
    }
    Ok(Arc::new(context))
}
