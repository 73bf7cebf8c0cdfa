//! TCPCLv4 messages (RFC 9174). Being written.
