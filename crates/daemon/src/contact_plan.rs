//! Reads the contact plan a node routes by (`contact_plan` in the configuration, `ferry node
//! --contact-plan`): the file in `node::plan`'s format, its node names checked against this
//! node's id, its times placed on the DTN clock. Routing by it is the node's (`node::cgr`); this
//! module only turns the file into the node's `ContactGraph`, once, at start.

use std::path::Path;
use std::sync::Arc;

use node::cgr::ContactGraph;
use node::plan::ContactPlan;
use wire::{DtnTime, Eid};

use crate::error::StartError;

/// The plan in `path` as a contact graph, its time 0 at its `epoch` or, without one, at `now`
/// (the node's start). Refused: a file that cannot be read or parsed, and a plan in which this
/// node has no contact (it could route nothing by it).
pub fn load(path: &Path, me: &Eid, now: DtnTime) -> Result<Arc<ContactGraph>, StartError> {
    let text = std::fs::read_to_string(path).map_err(|source| StartError::Io {
        what: format!("reading the contact plan {}", path.display()),
        source,
    })?;
    let plan: ContactPlan = text
        .parse()
        .map_err(|e| StartError::Config(format!("{}: {e}", path.display())))?;
    let origin = plan.epoch.unwrap_or(now);
    let graph = ContactGraph::new(plan.contacts(origin, |i| plan.node_id(i)));
    if !graph.knows(me) {
        let named = (0..plan.nodes.min(8))
            .map(|i| plan.node_id(i).to_string())
            .collect::<Vec<_>>()
            .join(", ");
        return Err(StartError::Config(format!(
            "{}: this node ({me}) has no contact in the plan; name it with a `node I {me}` line \
             (the plan's nodes are {named}{})",
            path.display(),
            if plan.nodes > 8 { ", …" } else { "" }
        )));
    }
    let future = graph.next_change(now).is_some();
    tracing::info!(
        plan = %path.display(),
        contacts = graph.len(),
        nodes = plan.nodes,
        epoch_ms = origin.as_millis(),
        "routing by a contact plan{}",
        if future { "" } else { " (every contact in it is over)" }
    );
    Ok(Arc::new(graph))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut f, text.as_bytes()).unwrap();
        f
    }

    #[test]
    fn a_plan_is_placed_at_its_epoch_or_at_the_start() {
        let me: Eid = "dtn://base/".parse().unwrap();
        let far: Eid = "dtn://n1/".parse().unwrap();
        let now = DtnTime::from_millis(1_000_000);
        let f = write("nodes 2\nnode 0 dtn://base/\n10 up 0 1\n20 down 0 1\n");
        let g = load(f.path(), &me, now).unwrap();
        let r = g.route(&me, &far, now).unwrap();
        assert_eq!(r.departs, DtnTime::from_millis(1_010_000));
        let f = write(
            "nodes 2\nnode 0 dtn://base/\nepoch 2000-01-01T00:00:00Z\n10 up 0 1\n20 down 0 1\n",
        );
        let g = load(f.path(), &me, now).unwrap();
        // The epoch is long past: the contact is over.
        assert_eq!(g.route(&me, &far, now), None);
    }

    #[test]
    fn a_plan_without_this_node_or_in_another_format_is_refused() {
        let me: Eid = "dtn://base/".parse().unwrap();
        let now = DtnTime::from_millis(0);
        let err = load(write("nodes 2\n0 up 0 1\n").path(), &me, now).unwrap_err();
        assert!(err.to_string().contains("node I dtn://base/"), "{err}");
        assert!(err.to_string().contains("dtn://n0/, dtn://n1/"), "{err}");
        let err = load(write("nodes 2\n0 sideways 0 1\n").path(), &me, now).unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
        let err = load(Path::new("/nonexistent/plan"), &me, now).unwrap_err();
        assert!(
            err.to_string().contains("reading the contact plan"),
            "{err}"
        );
    }
}
