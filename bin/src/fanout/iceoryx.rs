//! The iceoryx2 row of `ipc-parent fanout` (a build with `--features iceoryx2`), both sides,
//! written as iceoryx2's own examples do: a publish-subscribe service of `[u8]` slices, each
//! message a loaned sample (`loan_slice_uninit`, the message copied in, `send`), and beside it
//! an event service of the same name, as in its `event_based_communication` example: the
//! publisher notifies after every sample, and each subscriber blocks on its event listener
//! (`timed_wait`) and then receives every sample there. No polling, no sleep.
//!
//! The service is lossless, as every other row is: safe overflow off and the publisher's
//! backpressure strategy `RetryUntilDelivered` (its own adaptive wait while a subscriber's
//! buffer is full). A subscriber's buffer holds as many samples as the shmlink ring of the run
//! holds messages of the size ([`buffer_for`]), so that the rows queue alike.

use std::time::Duration;

use ::iceoryx2::port::listener::Listener;
use ::iceoryx2::port::notifier::Notifier;
use ::iceoryx2::port::publisher::Publisher;
use ::iceoryx2::port::BackpressureAction;
use ::iceoryx2::prelude::*;
use ::iceoryx2::service::port_factory::{event, publish_subscribe};
use anyhow::{anyhow, bail, Context};

use super::{Tally, CHECK_INTERVAL};
use crate::transport::Peer;

/// The iceoryx2 version the harness is built against (its `Cargo.lock` pins it).
pub const VERSION: &str = "0.10.0";

/// The most samples a subscriber's buffer holds.
pub const MAX_BUFFER: usize = 16 * 1024;

/// The samples of `size` bytes a subscriber's buffer holds: as many as the shmlink ring of
/// `ring_size` bytes holds messages of that size (each behind an 8-byte frame header, on
/// 8-byte boundaries), from 2 to [`MAX_BUFFER`].
pub fn buffer_for(ring_size: usize, size: usize) -> usize {
    let frame = (size + 8).next_multiple_of(8);
    (ring_size / frame).clamp(2, MAX_BUFFER)
}

/// A node that leaves signals to the harness (its Ctrl-C handling kills the children and
/// unwinds), logging only what goes wrong.
fn node() -> anyhow::Result<Node<ipc::Service>> {
    set_log_level(LogLevel::Error);
    NodeBuilder::new()
        .signal_handling_mode(SignalHandlingMode::Disabled)
        .create::<ipc::Service>()
        .map_err(|e| anyhow!("creating an iceoryx2 node: {e:?}"))
}

fn service_name(name: &str) -> anyhow::Result<ServiceName> {
    ServiceName::new(name).map_err(|e| anyhow!("iceoryx2 service name {name:?}: {e:?}"))
}

/// The publisher's side of a round: the two services, created before the subscribers start
/// (they open them). Its ports ([`Iox2Publisher`]) are made once the subscribers' processes
/// are known.
pub struct Iox2Services {
    pubsub: publish_subscribe::PortFactory<ipc::Service, [u8], ()>,
    events: event::PortFactory<ipc::Service>,
    _node: Node<ipc::Service>,
}

/// The publisher's ports: the publisher and the notifier that wakes the subscribers.
pub struct Iox2Publisher {
    publisher: Publisher<ipc::Service, [u8], ()>,
    notifier: Notifier<ipc::Service>,
}

impl Iox2Services {
    /// Creates the services `name` for `subscribers` subscribers, each with a buffer of
    /// `buffer` samples.
    pub fn create(name: &str, subscribers: usize, buffer: usize) -> anyhow::Result<Iox2Services> {
        let node = node()?;
        let service = service_name(name)?;
        let pubsub = node
            .service_builder(&service)
            .publish_subscribe::<[u8]>()
            .enable_safe_overflow(false)
            .max_publishers(1)
            .max_subscribers(subscribers)
            .max_nodes(subscribers + 1)
            .subscriber_max_buffer_size(buffer)
            .create()
            .map_err(|e| anyhow!("creating iceoryx2 service {name:?}: {e:?}"))?;
        let events = node
            .service_builder(&service)
            .event()
            .max_notifiers(1)
            .max_listeners(subscribers)
            .max_nodes(subscribers + 1)
            .create()
            .map_err(|e| anyhow!("creating iceoryx2 event service {name:?}: {e:?}"))?;
        Ok(Iox2Services {
            pubsub,
            events,
            _node: node,
        })
    }

    /// Whether `n` subscribers, each with its event listener, are there.
    pub fn connected(&self, n: usize) -> bool {
        self.pubsub.dynamic_config().number_of_subscribers() >= n
            && self.events.dynamic_config().number_of_listeners() >= n
    }

    /// The publisher of `size`-byte messages and its notifier. A full subscriber buffer makes
    /// it retry until the subscriber takes a sample, giving up when one of `peers` (the
    /// subscribers' processes) died, when the run is interrupted, or after `limit`.
    pub fn publisher(
        &self,
        size: usize,
        peers: Vec<Peer>,
        limit: Duration,
    ) -> anyhow::Result<Iox2Publisher> {
        let publisher = self
            .pubsub
            .publisher_builder()
            .initial_max_slice_len(size)
            .backpressure_strategy(BackpressureStrategy::RetryUntilDelivered)
            .set_backpressure_handler(move |info: &::iceoryx2::port::BackpressureInfo| {
                // The retries go on in iceoryx2's wait; every thousandth one looks whether the
                // subscribers can still take a sample.
                let hopeless = info.elapsed_time > limit
                    || crate::parent::interrupted()
                    || (info.retries % 1000 == 999 && peers.iter().any(Peer::is_gone));
                if hopeless {
                    BackpressureAction::DiscardDataAndFail
                } else {
                    BackpressureAction::FollowBackpressureyStrategy
                }
            })
            .create()
            .map_err(|e| anyhow!("creating an iceoryx2 publisher: {e:?}"))?;
        let notifier = self
            .events
            .notifier_builder()
            .create()
            .map_err(|e| anyhow!("creating an iceoryx2 notifier: {e:?}"))?;
        Ok(Iox2Publisher {
            publisher,
            notifier,
        })
    }
}

impl Iox2Publisher {
    /// Publishes `msg`: a sample loaned, the message copied into it and sent to every
    /// subscriber, then one notification that wakes them.
    #[inline]
    pub fn send(&self, msg: &[u8]) -> anyhow::Result<()> {
        let sample = self
            .publisher
            .loan_slice_uninit(msg.len())
            .map_err(|e| anyhow!("iceoryx2 loan: {e:?}"))?;
        sample
            .write_from_slice(msg)
            .send()
            .map_err(|e| anyhow!("iceoryx2 send: {e:?}"))?;
        self.notifier
            .notify()
            .map_err(|e| anyhow!("iceoryx2 notify: {e:?}"))?;
        Ok(())
    }
}

/// The subscriber's side: joins the services `name` (made by the parent before the spawn),
/// then waits for notifications and takes every sample there, until the end message. Gives up
/// when `parent` is gone.
pub fn subscribe(name: &str, tally: &mut Tally, parent: Peer) -> anyhow::Result<()> {
    let node = node()?;
    let service = service_name(name)?;
    let events = node
        .service_builder(&service)
        .event()
        .open()
        .map_err(|e| anyhow!("opening iceoryx2 event service {name:?}: {e:?}"))?;
    // The listener first: once the publisher counts this subscriber, every notification
    // reaches it.
    let listener: Listener<ipc::Service> = events
        .listener_builder()
        .create()
        .map_err(|e| anyhow!("creating an iceoryx2 listener: {e:?}"))?;
    let pubsub = node
        .service_builder(&service)
        .publish_subscribe::<[u8]>()
        .open()
        .map_err(|e| anyhow!("opening iceoryx2 service {name:?}: {e:?}"))?;
    let subscriber = pubsub
        .subscriber_builder()
        .create()
        .map_err(|e| anyhow!("creating an iceoryx2 subscriber: {e:?}"))?;
    loop {
        listener
            .timed_wait(|_| {}, CHECK_INTERVAL)
            .map_err(|e| anyhow!("iceoryx2 listener: {e:?}"))?;
        while let Some(sample) = subscriber
            .receive()
            .map_err(|e| anyhow!("iceoryx2 receive: {e:?}"))?
        {
            if tally.take(sample.payload()).context("iceoryx2 sample")? {
                return Ok(());
            }
        }
        if parent.is_gone() {
            bail!("the publisher's process is gone");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_hold_what_the_ring_holds() {
        assert_eq!(buffer_for(1 << 20, 64), (1 << 20) / 72);
        assert_eq!(buffer_for(1 << 20, 4096), (1 << 20) / 4104);
        assert_eq!(buffer_for(1 << 20, 24), MAX_BUFFER);
        assert_eq!(buffer_for(4096, 1 << 20), 2);
    }
}
