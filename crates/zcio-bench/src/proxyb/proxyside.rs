//! The sides of part (a) that use the proxy layer
//! (`zcio::proxy`): a client timing asynchronous sends, and a server
//! receiving through the asynchronous receive proxy.

use std::time::Instant;

use zcio::proxy::{Proxies, ProxyConfig, ProxyEndpoint};
use zcio::rendezvous::{Envelope, Rendezvous};

use super::latency::{Timer, PING, PONG, STOP};
use super::{left, Sample};

/// Whether the proxy layer is part of this build.
pub const BUILT: bool = true;

/// Time `send` returning; wait for each ticket outside the measurement.
pub fn send_client(
    ep: Rendezvous,
    warmup: u64,
    iters: u64,
    deadline: Instant,
) -> Result<Sample, String> {
    let proxies = Proxies::new(ProxyConfig::default());
    let aep = ProxyEndpoint::new(ep, &proxies);
    let mut t = Timer::default();
    for i in 0..warmup + iters {
        let msg = Envelope::new(PING, &[i]);
        let ticket = t
            .time(i >= warmup, || aep.send(msg))
            .map_err(|e| format!("async send {i}: {e}"))?;
        ticket
            .wait_timeout(left(deadline))
            .map_err(|e| format!("ticket {i}: {e}"))?;
    }
    let stop = aep
        .send(Envelope::new(STOP, &[]))
        .map_err(|e| format!("stop: {e}"))?;
    stop.wait_timeout(left(deadline))
        .map_err(|e| format!("stop: {e}"))?;
    Ok(t.sample())
}

/// Receive each request through the receive proxy, answer with the
/// synchronous send of the same endpoint.
pub fn receive_server(ep: Rendezvous, deadline: Instant) -> Result<(), String> {
    let proxies = Proxies::new(ProxyConfig::default());
    let aep = ProxyEndpoint::new(ep, &proxies);
    loop {
        let m = aep
            .recv_timeout(left(deadline))
            .map_err(|e| format!("async receive: {e}"))?;
        match m.label {
            STOP => {
                aep.close();
                return Ok(());
            }
            _ => aep
                .endpoint()
                .send_timeout(&Envelope::new(PONG, &m.words), left(deadline))
                .map_err(|e| format!("reply: {e}"))?,
        }
    }
}
