//! [`NodePort`]: everything the engine asks of the node beneath it, and nothing more: who it is,
//! sending a bundle, whether a node is reachable now (and in how many hops), the reliable
//! streams, what arrives in pieces, and the engine's own tables in the node's store (whose
//! changes join the store's one batch, so a record and the bundle it refers to commit together).
//!
//! The engine never sees the node's routing, links, bundles in store or events beyond what the
//! shell hands it (`Rpc::handle_node_event`); a test may put anything that answers these
//! questions beneath it.

use bytes::Bytes;
use node::stream::StreamId;
use node::{Arriving, Node, Outgoing, SendError};
use store::Tables;
use wire::{BundleId, DtnTime, Eid};

/// What the RPC engine needs of its node (see the module docs). [`Node`] is one.
pub trait NodePort {
    /// The node's id.
    fn id(&self) -> &Eid;
    /// Sends a bundle.
    fn send(&mut self, now: DtnTime, out: Outgoing) -> Result<BundleId, SendError>;
    /// In how many hops `node` is reachable now over the current mesh, if it is (0: itself).
    fn reachable(&self, node: &Eid) -> Option<u32>;
    /// Whether `node` is a neighbour known to be another BPv7 implementation, which would only
    /// store the engine's hellos until they expire (`node::NodeConfig::summary_grace`).
    fn is_foreign(&self, node: &Eid) -> bool;
    /// Opens a stream from `local` to `remote` with `data` on it, closing our side if `close`.
    fn stream_open_with(
        &mut self,
        now: DtnTime,
        local: Eid,
        remote: Eid,
        data: Bytes,
        close: bool,
    ) -> Result<StreamId, SendError>;
    /// Queues data on a stream.
    fn stream_send(&mut self, now: DtnTime, id: StreamId, data: Bytes) -> Result<(), SendError>;
    /// Queues data on a stream and closes our side.
    fn stream_send_last(
        &mut self,
        now: DtnTime,
        id: StreamId,
        data: Bytes,
    ) -> Result<(), SendError>;
    /// Closes our side of a stream.
    fn stream_close(&mut self, now: DtnTime, id: StreamId) -> Result<(), SendError>;
    /// Bundles arriving in pieces (fragments being reassembled).
    fn arriving(&self) -> Vec<Arriving<'_>>;
    /// The engine's tables.
    fn tables(&self) -> &dyn Tables;
    /// The engine's tables, to change them (in the store's open batch).
    fn tables_mut(&mut self) -> &mut dyn Tables;
}

impl NodePort for Node {
    fn id(&self) -> &Eid {
        Node::id(self)
    }

    fn send(&mut self, now: DtnTime, out: Outgoing) -> Result<BundleId, SendError> {
        Node::send(self, now, out)
    }

    fn reachable(&self, node: &Eid) -> Option<u32> {
        Node::reachable(self, node)
    }

    fn is_foreign(&self, node: &Eid) -> bool {
        Node::is_foreign(self, node)
    }

    fn stream_open_with(
        &mut self,
        now: DtnTime,
        local: Eid,
        remote: Eid,
        data: Bytes,
        close: bool,
    ) -> Result<StreamId, SendError> {
        Node::stream_open_with(self, now, local, remote, data, close)
    }

    fn stream_send(&mut self, now: DtnTime, id: StreamId, data: Bytes) -> Result<(), SendError> {
        Node::stream_send(self, now, id, data)
    }

    fn stream_send_last(
        &mut self,
        now: DtnTime,
        id: StreamId,
        data: Bytes,
    ) -> Result<(), SendError> {
        Node::stream_send_last(self, now, id, data)
    }

    fn stream_close(&mut self, now: DtnTime, id: StreamId) -> Result<(), SendError> {
        Node::stream_close(self, now, id)
    }

    fn arriving(&self) -> Vec<Arriving<'_>> {
        Node::arriving(self).collect()
    }

    fn tables(&self) -> &dyn Tables {
        self.store()
    }

    fn tables_mut(&mut self) -> &mut dyn Tables {
        self.store_mut()
    }
}
