//! How the client commands read the names of nodes and endpoints, the same way in every command:
//! `bravo` is the node `dtn://bravo/`, `bravo/files` its endpoint `dtn://bravo/files`, and a
//! full id (`dtn://bravo/files`, `ipn:2.1`) is taken as it is; `ipn:2` is the node `ipn:2.0`.

use anyhow::Result;
use wire::Eid;

use crate::exit::usage;

/// The service a bundle goes to when `ferry send` is given a node without one (`bravo`), and
/// the one `ferry recv` reads by default.
pub(crate) const DEFAULT_SERVICE: &str = "inbox";

/// The node a NODE argument names: `bravo`, `dtn://bravo`, `dtn://bravo/`, `ipn:2`, `ipn:2.0`.
/// An endpoint with a service names its node only where `allow_service` says so.
pub(crate) fn node(text: &str, allow_service: bool) -> Result<Eid> {
    let eid = parse(text, "")?;
    let node = eid.node_id();
    if !allow_service && node != eid && !is_bare_dtn(text) {
        return Err(usage(format!(
            "{text:?} is an endpoint; give a node: {node} (or just its name)"
        )));
    }
    match node {
        Eid::Null => Err(usage("dtn:none names no node")),
        node => Ok(node),
    }
}

/// The endpoint a DEST argument names: a full id as it is, `bravo/files` on node `bravo`, and a
/// node alone (`bravo`, `ipn:2`) its `service` (an `ipn:` node's service must be a number).
pub(crate) fn endpoint(text: &str, service: &str) -> Result<Eid> {
    let eid = parse(text, service)?;
    if eid.is_null() {
        return Err(usage("dtn:none is nobody's endpoint"));
    }
    Ok(eid)
}

/// `dtn://bravo` (without the slash) names the node, not an endpoint with an empty demux.
fn is_bare_dtn(text: &str) -> bool {
    text.strip_prefix("dtn://")
        .is_some_and(|rest| !rest.is_empty() && !rest.contains('/'))
}

/// `text` as an endpoint id; a bare name or `ipn:N` gets `service`.
fn parse(text: &str, service: &str) -> Result<Eid> {
    let text = text.trim();
    let full = if text.is_empty() {
        return Err(usage(
            "give a node (bravo, dtn://bravo/, ipn:2) or an endpoint",
        ));
    } else if let Some(rest) = text.strip_prefix("dtn://") {
        if rest.contains('/') {
            text.to_owned()
        } else {
            format!("{text}/{service}")
        }
    } else if let Some(node) = text.strip_prefix("ipn:") {
        if node.contains('.') {
            text.to_owned()
        } else if service.is_empty() {
            format!("{text}.0")
        } else {
            format!("{text}.{service}")
        }
    } else if text.contains(':') {
        // dtn:none, or a scheme we do not know: the parser says which.
        text.to_owned()
    } else if text.contains('/') {
        format!("dtn://{text}")
    } else {
        format!("dtn://{text}/{service}")
    };
    full.parse::<Eid>()
        .map_err(|e| usage(format!("{text:?} is no node or endpoint: {e}")))
}

/// A node's echo service (`ferry ping`).
pub(crate) fn echo_of(node: &Eid) -> Eid {
    service_of(node, daemon::core::ECHO_SERVICE, host::IPN_ECHO_SERVICE)
}

/// A node's discard service (`ferry trace`): delivered, reported, kept nowhere.
pub(crate) fn discard_of(node: &Eid) -> Eid {
    service_of(
        node,
        daemon::core::DISCARD_SERVICE,
        host::IPN_DISCARD_SERVICE,
    )
}

/// The endpoint of service `dtn_service` (on a `dtn:` node) or `ipn_service` (on an `ipn:` one)
/// of `node`.
pub(crate) fn service_of(node: &Eid, dtn_service: &str, ipn_service: u64) -> Eid {
    match node {
        Eid::Ipn { node, .. } => Eid::Ipn {
            node: *node,
            service: ipn_service,
        },
        other => format!("{other}{dtn_service}")
            .parse()
            .unwrap_or_else(|_| other.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node_of(text: &str) -> String {
        node(text, false).unwrap().to_string()
    }

    fn endpoint_of(text: &str) -> String {
        endpoint(text, DEFAULT_SERVICE).unwrap().to_string()
    }

    #[test]
    fn a_node_by_any_of_its_names() {
        for text in ["bravo", "dtn://bravo", "dtn://bravo/", " bravo "] {
            assert_eq!(node_of(text), "dtn://bravo/", "{text}");
        }
        assert_eq!(node_of("ipn:2"), "ipn:2.0");
        assert_eq!(node_of("ipn:2.0"), "ipn:2.0");
        assert_eq!(
            node("dtn://bravo/inbox", true).unwrap().to_string(),
            "dtn://bravo/"
        );
        for bad in [
            "dtn://bravo/inbox",
            "ipn:2.7",
            "",
            "dtn:none",
            "http://x",
            "ipn:x",
        ] {
            assert!(node(bad, false).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_endpoint_by_its_id_or_its_node() {
        assert_eq!(endpoint_of("bravo"), "dtn://bravo/inbox");
        assert_eq!(endpoint_of("dtn://bravo"), "dtn://bravo/inbox");
        assert_eq!(endpoint_of("bravo/files"), "dtn://bravo/files");
        assert_eq!(endpoint_of("dtn://bravo/files"), "dtn://bravo/files");
        // A full id is taken as it is, even the node id itself.
        assert_eq!(endpoint_of("dtn://bravo/"), "dtn://bravo/");
        assert_eq!(endpoint_of("dtn://~all/~news"), "dtn://~all/~news");
        assert_eq!(endpoint_of("ipn:2.1"), "ipn:2.1");
        assert_eq!(endpoint("ipn:2", "5").unwrap().to_string(), "ipn:2.5");
        // An ipn node has no named services.
        assert!(endpoint("ipn:2", DEFAULT_SERVICE).is_err());
        assert!(endpoint("dtn:none", DEFAULT_SERVICE).is_err());
        assert!(endpoint("", DEFAULT_SERVICE).is_err());
    }

    #[test]
    fn a_nodes_own_services() {
        let bravo = node("bravo", false).unwrap();
        assert_eq!(
            service_of(&bravo, "echo", 7).to_string(),
            "dtn://bravo/echo"
        );
        let two = node("ipn:2", false).unwrap();
        assert_eq!(service_of(&two, "echo", 7).to_string(), "ipn:2.7");
        assert_eq!(echo_of(&bravo).to_string(), "dtn://bravo/echo");
        assert_eq!(discard_of(&bravo).to_string(), "dtn://bravo/discard");
        assert_eq!(echo_of(&two).to_string(), "ipn:2.7");
        assert_eq!(discard_of(&two).to_string(), "ipn:2.9");
    }
}
