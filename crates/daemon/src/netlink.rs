//! Link changes from the kernel (rtnetlink, Linux): a link whose carrier came up, an address or
//! a route added. A contact in the field begins with one of these (a radio in range, a cable
//! plugged in, a veth set up), and the event loop answers each by dialling its static peers that
//! have no session at once and sending a beacon, instead of waiting for a peer's backoff (up to
//! 10 s) or the next beacon period: the contact is the unit that matters, and its first seconds
//! were lost to waiting.
//!
//! Only the kernel sends to this socket (a netlink message's sender port is checked: 0 is the
//! kernel), a burst of changes is one wake-up (the channel holds one), and there are at most ten
//! wake-ups a second. What it never does:
//! look at what changed beyond "something came up"; dialling is the event loop's.

use std::io;
use std::os::fd::{AsRawFd as _, OwnedFd};

use nix::errno::Errno;
use nix::sys::socket::{
    AddressFamily, NetlinkAddr, SockFlag, SockProtocol, SockType, bind, recvfrom, setsockopt,
    socket, sockopt,
};
use nix::sys::time::TimeVal;
use tokio::sync::mpsc;

/// Multicast groups: links, IPv4 and IPv6 addresses and routes.
const GROUPS: u32 = libc_groups::LINK
    | libc_groups::IPV4_IFADDR
    | libc_groups::IPV6_IFADDR
    | libc_groups::IPV4_ROUTE
    | libc_groups::IPV6_ROUTE;

/// The legacy multicast group bits of `<linux/rtnetlink.h>`.
mod libc_groups {
    pub(super) const LINK: u32 = 0x1;
    pub(super) const IPV4_IFADDR: u32 = 0x10;
    pub(super) const IPV4_ROUTE: u32 = 0x40;
    pub(super) const IPV6_IFADDR: u32 = 0x100;
    pub(super) const IPV6_ROUTE: u32 = 0x400;
}

/// The shortest time between two wake-ups of the event loop.
const MIN_WAKE_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

const RTM_NEWLINK: u16 = 16;
const RTM_NEWADDR: u16 = 20;
const RTM_NEWROUTE: u16 = 24;
/// `IFF_LOWER_UP`: the link's carrier is up.
const IFF_LOWER_UP: u32 = 0x10000;

/// Opens the socket and starts the thread that sends `()` on `changed` whenever a link, address
/// or route came up; the thread ends within a second of `changed` closing (the daemon stopped).
/// An error (no netlink: not Linux, or a sandbox without it) leaves the node working as before,
/// with backoffs and beacon periods alone.
///
/// A thread rather than a task: registering a raw descriptor with tokio's reactor is `unsafe`,
/// and one blocked thread per daemon costs nothing a node would notice.
pub(crate) fn watch(changed: mpsc::Sender<()>) -> io::Result<std::thread::JoinHandle<()>> {
    let fd: OwnedFd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    )?;
    bind(fd.as_raw_fd(), &NetlinkAddr::new(0, GROUPS))?;
    setsockopt(&fd, sockopt::ReceiveTimeout, &TimeVal::new(1, 0))?;
    std::thread::Builder::new()
        .name("ferry-netlink".into())
        .spawn(move || {
            let mut buf = vec![0u8; 16 * 1024];
            while !changed.is_closed() {
                let came_up = match recvfrom::<NetlinkAddr>(fd.as_raw_fd(), &mut buf) {
                    // Only the kernel (port 0) speaks for the links.
                    Ok((n, from)) => from.is_some_and(|a| a.pid() == 0) && any_came_up(&buf[..n]),
                    Err(Errno::EAGAIN | Errno::EINTR) => false,
                    // The kernel dropped messages for us: something changed.
                    Err(Errno::ENOBUFS) => true,
                    Err(e) => {
                        tracing::warn!("reading link changes (netlink): {e}; not watched any more");
                        return;
                    }
                };
                if came_up {
                    // Full: a wake-up is pending already, which covers this change too.
                    let _ = changed.try_send(());
                    // At most ten wake-ups a second, however busy the routing table is: what
                    // changes meanwhile waits in the socket and makes the next one.
                    std::thread::sleep(MIN_WAKE_INTERVAL);
                }
            }
        })
}

/// Whether the messages in `buf` say that a link's carrier is up, or an address or a route was
/// added. Malformed input is "no".
pub(crate) fn any_came_up(mut buf: &[u8]) -> bool {
    let mut up = false;
    while buf.len() >= 16 {
        let len = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        let kind = u16::from_ne_bytes([buf[4], buf[5]]);
        if len < 16 || len > buf.len() {
            return up;
        }
        let body = &buf[16..len];
        up |= match kind {
            // struct ifinfomsg: family, pad, type (u16), index (i32), flags (u32), change (u32).
            RTM_NEWLINK => {
                body.len() >= 16 && {
                    let flags = u32::from_ne_bytes([body[8], body[9], body[10], body[11]]);
                    flags & IFF_LOWER_UP != 0
                }
            }
            RTM_NEWADDR | RTM_NEWROUTE => true,
            _ => false,
        };
        // Messages are aligned to 4 bytes.
        let next = (len + 3) & !3;
        buf = buf.get(next..).unwrap_or_default();
    }
    up
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(kind: u16, body: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(body);
        while m.len() % 4 != 0 {
            m.push(0);
        }
        m
    }

    fn link(flags: u32) -> Vec<u8> {
        let mut body = vec![0u8; 16];
        body[8..12].copy_from_slice(&flags.to_ne_bytes());
        message(RTM_NEWLINK, &body)
    }

    #[test]
    fn a_carrier_up_an_address_or_a_route_is_a_change_and_nothing_else() {
        assert!(any_came_up(&link(IFF_LOWER_UP | 1)));
        assert!(!any_came_up(&link(1)), "a link going down");
        assert!(any_came_up(&message(RTM_NEWADDR, &[0; 8])));
        assert!(any_came_up(&message(RTM_NEWROUTE, &[0; 12])));
        assert!(!any_came_up(&message(21, &[0; 8])), "an address removed");
        let mut both = link(1);
        both.extend(message(RTM_NEWROUTE, &[0; 12]));
        assert!(any_came_up(&both), "the second of two messages");
        // Malformed: a length beyond the buffer, or below a header.
        let mut bad = message(RTM_NEWADDR, &[0; 8]);
        bad[0] = 200;
        assert!(!any_came_up(&bad));
        assert!(!any_came_up(&[0; 15]));
        let mut short = message(RTM_NEWADDR, &[]);
        short[0] = 4;
        assert!(!any_came_up(&short));
        assert!(
            !any_came_up(&message(RTM_NEWLINK, &[0; 4])),
            "a truncated ifinfomsg"
        );
    }
}
