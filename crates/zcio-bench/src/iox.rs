//! iceoryx2 baseline for the cross-process transfer benchmark.
//!
//! [`publisher`] and [`subscriber`] each run in their own process and talk over an iceoryx2
//! `ipc` publish-subscribe service with `[u8]` slice payloads; a [`PingPort`] is one side of a
//! ping-pong over two such services (the transfer benchmark drives it). Per message the publisher writes
//! one `u64` (the sequence number) at the start of every 4096-byte page and the subscriber reads
//! one `u64` per page, so both sides touch every page of every message.
//!
//! Service configuration (identical on both sides, whichever process creates the service):
//! - no safe overflow + `RetryUntilDelivered` backpressure: a full subscriber buffer makes the
//!   publisher wait, nothing is dropped; the wait is bounded by a backpressure handler that
//!   fails the send once the deadline has passed;
//! - history 0, subscriber buffer [`SUB_BUFFER`], 1 publisher, 1 subscriber;
//! - `AllocationStrategy::Static` with `initial_max_slice_len(size)`: the publisher's data
//!   segment holds `1 * (SUB_BUFFER + SUB_BORROWED) + 0 + PUB_LOANED` = 6 chunks of `size`
//!   bytes (about 96 MiB in /dev/shm for 16 MiB messages).
//!
//! Completion: the subscriber drops its port after releasing the last sample; the publisher keeps
//! its node alive until the service reports zero subscribers (bounded by the deadline).
//! iceoryx2 keeps management files in /tmp/iceoryx2 and shared memory in /dev/shm (`iox2_*`); they
//! are removed when the nodes drop, and those of dead nodes (crashed runs) are removed when a new
//! node is created (`cleanup_dead_nodes_on_creation`, on in the default config used here).

use std::hint::black_box;
use std::mem::MaybeUninit;
use std::time::{Duration, Instant};

use iceoryx2::port::update_connections::UpdateConnections;
use iceoryx2::port::{BackpressureAction, LoanError};
use iceoryx2::prelude::*;
use iceoryx2::service::builder::event::{
    EventCreateError as EvCreateErr, EventOpenError as EvOpenErr,
    EventOpenOrCreateError as EvOocErr,
};
use iceoryx2::service::builder::publish_subscribe::{
    PublishSubscribeCreateError as CreateErr, PublishSubscribeOpenError as OpenErr,
    PublishSubscribeOpenOrCreateError as OocErr,
};
use iceoryx2::service::port_factory::publish_subscribe::PortFactory as PubSubFactory;

const PAGE: usize = 4096;
const WORD: usize = std::mem::size_of::<u64>();
/// Subscriber buffer depth (samples in flight between publisher and subscriber).
const SUB_BUFFER: usize = 2;
/// Samples the subscriber may hold at once (it holds one).
const SUB_BORROWED: usize = 2;
/// Samples the publisher may have loaned at once (it loans one).
const PUB_LOANED: usize = 2;

type Factory = PubSubFactory<ipc::Service, [u8], ()>;

/// The payload addresses of the publisher's chunks that were fully
/// initialised once (see SAFETY in [`send_seq`]). The data segment holds a
/// handful of chunks (`SUB_BUFFER + SUB_BORROWED + PUB_LOANED`), so a
/// linear look among a few words costs a few nanoseconds per send: iceoryx2's
/// own benchmark keeps no such set at all (its payloads are `Copy` types
/// written whole), and a `HashSet` insert per send cost this port 25–40 ns of
/// its ~456 ns.
#[derive(Default)]
struct Initialised(Vec<usize>);

impl Initialised {
    /// Whether `addr` is seen for the first time (and remember it).
    fn first_use(&mut self, addr: usize) -> bool {
        if self.0.contains(&addr) {
            return false;
        }
        self.0.push(addr);
        true
    }
}

/// Validates the arguments and returns the total number of messages.
fn check_args(size: usize, warmup: usize, count: usize) -> Result<u64, String> {
    if size < WORD {
        return Err(format!("iox: payload size {size} is smaller than a u64"));
    }
    if count < 2 {
        return Err(format!("iox: count must be >= 2 (got {count})"));
    }
    let total = warmup
        .checked_add(count)
        .ok_or("iox: warmup + count overflows")?;
    Ok(total as u64)
}

fn create_node() -> Result<Node<ipc::Service>, String> {
    // iceoryx2 logs to stderr only; Error keeps it quiet (Warn would print e.g. "no config file"
    // while reaping dead nodes). IOX2_LOG_LEVEL=Debug overrides this to diagnose failures.
    set_log_level_from_env_or(LogLevel::Error);
    NodeBuilder::new()
        // Built-in defaults on both sides (ignore any iceoryx2.toml): identical, reproducible
        // settings, including removal of dead nodes' stale resources on node creation.
        .config(&Config::default())
        // Install no SIGINT/SIGTERM handlers: the harness must be able to kill us.
        .signal_handling_mode(SignalHandlingMode::Disabled)
        .create::<ipc::Service>()
        .map_err(|e| format!("iox: node creation failed: {e:?}"))
}

/// `Err` once `deadline` has passed.
fn check_deadline(deadline: Instant, what: &str) -> Result<(), String> {
    if Instant::now() >= deadline {
        return Err(format!("iox: timed out {what}"));
    }
    Ok(())
}

/// Opens or creates the service, retrying the transient failures that occur when both
/// processes try to create it at the same moment.
fn open_service(
    node: &Node<ipc::Service>,
    service: &str,
    deadline: Instant,
) -> Result<Factory, String> {
    let name = ServiceName::new(service)
        .map_err(|e| format!("iox: bad service name {service:?}: {e:?}"))?;
    let align = Alignment::new(WORD).ok_or("iox: invalid alignment")?;
    loop {
        let err = match node
            .service_builder(&name)
            .publish_subscribe::<[u8]>()
            .payload_alignment(align)
            .enable_safe_overflow(false)
            .history_size(0)
            .subscriber_max_buffer_size(SUB_BUFFER)
            .subscriber_max_borrowed_samples(SUB_BORROWED)
            .max_publishers(1)
            .max_subscribers(1)
            .max_nodes(4)
            .open_or_create()
        {
            Ok(factory) => return Ok(factory),
            Err(e) => e,
        };
        let transient = matches!(
            err,
            OocErr::SystemInFlux
                | OocErr::PublishSubscribeOpenError(
                    OpenErr::DoesNotExist | OpenErr::HangsInCreation | OpenErr::InternalFailure
                )
                | OocErr::PublishSubscribeCreateError(
                    CreateErr::AlreadyExists
                        | CreateErr::IsBeingCreatedByAnotherInstance
                        | CreateErr::HangsInCreation
                )
        );
        if !transient {
            return Err(format!(
                "iox: cannot open/create service {service:?}: {err:?}"
            ));
        }
        check_deadline(deadline, &format!("opening service {service:?} ({err:?})"))?;
        std::thread::sleep(Duration::from_millis(1));
    }
}

type Pub = iceoryx2::port::publisher::Publisher<ipc::Service, [u8], ()>;

/// A publisher for `factory`'s service with the settings described at the top, connected to
/// the service's subscriber (waits for it, bounded by `deadline`).
fn publisher_port(factory: &Factory, size: usize, deadline: Instant) -> Result<Pub, String> {
    let publisher = factory
        .publisher_builder()
        .initial_max_slice_len(size)
        .allocation_strategy(AllocationStrategy::Static)
        .max_loaned_samples(PUB_LOANED)
        .backpressure_strategy(BackpressureStrategy::RetryUntilDelivered)
        // Wait while the subscriber buffer is full, but give up once the deadline has passed.
        .set_backpressure_handler(move |_: &_| {
            if Instant::now() < deadline {
                BackpressureAction::Retry
            } else {
                BackpressureAction::DiscardDataAndFail
            }
        })
        .create()
        .map_err(|e| format!("iox: publisher creation failed: {e:?}"))?;
    while factory.dynamic_config().number_of_subscribers() == 0 {
        check_deadline(deadline, "waiting for the subscriber to connect")?;
        std::thread::sleep(Duration::from_micros(200));
    }
    publisher
        .update_connections()
        .map_err(|e| format!("iox: connecting to the subscriber failed: {e:?}"))?;
    Ok(publisher)
}

/// A loaned, not yet written sample.
type Loaned = iceoryx2::sample_mut_uninit::SampleMutUninit<ipc::Service, [MaybeUninit<u8>], ()>;

/// Loan a sample of `size` bytes for message `seq`, waiting (bounded by
/// `deadline`) while every chunk is in flight.
fn loan(publisher: &Pub, size: usize, seq: u64, deadline: Instant) -> Result<Loaned, String> {
    loop {
        match publisher.loan_slice_uninit(size) {
            Ok(s) => return Ok(s),
            // All chunks are still in flight: wait for the subscriber to release one.
            Err(LoanError::OutOfMemory) => {
                check_deadline(deadline, &format!("loaning message {seq}"))?;
                std::thread::yield_now();
            }
            Err(e) => {
                return Err(format!(
                    "iox: loan of {size} bytes failed at message {seq}: {e:?}"
                ))
            }
        }
    }
}

/// Send one message of `size` bytes with `seq` in the first word of every page, retrying
/// until it is delivered (bounded by `deadline`), in `ahead` if a sample was loaned ahead.
/// `initialised` remembers the chunks whose bytes have all been written once.
fn send_seq(
    publisher: &Pub,
    initialised: &mut Initialised,
    ahead: Option<Loaned>,
    size: usize,
    seq: u64,
    deadline: Instant,
) -> Result<(), String> {
    let mut ahead = ahead;
    loop {
        let mut sample = match ahead.take() {
            Some(s) => s,
            None => loan(publisher, size, seq, deadline)?,
        };
        let buf: &mut [MaybeUninit<u8>] = sample.payload_mut();
        if buf.len() != size {
            return Err(format!("iox: loaned {} bytes, expected {size}", buf.len()));
        }
        if initialised.first_use(buf.as_ptr() as usize) {
            buf.fill(MaybeUninit::new(0)); // first use of this chunk only, never per message
        }
        for off in (0..=size - WORD).step_by(PAGE) {
            for (dst, byte) in buf[off..off + WORD].iter_mut().zip(seq.to_ne_bytes()) {
                dst.write(byte);
            }
        }
        // `assume_init` requires all `size` bytes to be initialised. The first time a
        // chunk (identified by its payload address; chunks are fixed slots of the static data
        // segment and every loan has the same length `size`) is loaned, all of its bytes are set
        // to 0 above. Afterwards its bytes are only ever overwritten with initialised values by
        // this process: the subscriber only reads, and iceoryx2 writes the chunk header, never
        // the payload. The segment stays mapped while `publisher` lives, so no byte can become
        // uninitialised again. `u8` has no invalid bit patterns.
        // SAFETY: as argued just above.
        let sample = unsafe { sample.assume_init() };
        let receivers = sample.send().map_err(|e| {
            format!("iox: send of message {seq} failed (timeout or broken connection): {e:?}")
        })?;
        if receivers == 0 {
            // The subscriber port is registered but has not attached to our connection yet and
            // the queue is full: iceoryx2 discards instead of blocking then. Send `seq` again.
            check_deadline(
                deadline,
                &format!("delivering message {seq} (subscriber not attached)"),
            )?;
            std::thread::yield_now();
            continue;
        }
        return Ok(());
    }
}

/// Publisher side. Creates/opens the publish-subscribe service `service` (`[u8]` slices of
/// `size` bytes), waits for one subscriber, sends `warmup + count` messages (each with the
/// sequence number written at the start of every 4096-byte page), then waits until the
/// subscriber has left. Everything is bounded by `timeout`. Returns its CPU time (user +
/// system nanoseconds) from message `warmup` to the last send.
pub fn publisher(
    service: &str,
    size: usize,
    warmup: usize,
    count: usize,
    timeout: Duration,
) -> Result<u64, String> {
    let mut cpu = crate::cpu::Window::default();
    let deadline = Instant::now() + timeout;
    let total = check_args(size, warmup, count)?;
    let node = create_node()?;
    let factory = open_service(&node, service, deadline)?;
    let publisher = publisher_port(&factory, size, deadline)?;

    // Payload addresses of the chunks that have been fully initialised once (see SAFETY in
    // `send_seq`).
    let mut initialised = Initialised::default();
    for seq in 0..total {
        if seq == warmup as u64 {
            cpu.start();
        }
        send_seq(&publisher, &mut initialised, None, size, seq, deadline)?;
    }
    let cpu_ns = cpu.elapsed_ns();

    // Keep the data segment alive until the subscriber has released everything and left.
    while factory.dynamic_config().number_of_subscribers() != 0 {
        check_deadline(deadline, "waiting for the subscriber to finish")?;
        std::thread::sleep(Duration::from_micros(200));
    }
    Ok(cpu_ns) // drops publisher, factory and node, in that order, removing their resources
}

type Sub = iceoryx2::port::subscriber::Subscriber<ipc::Service, [u8], ()>;

type EventFactory = iceoryx2::service::port_factory::event::PortFactory<ipc::Service>;

/// The longest single listener wait of a blocking receive (then the deadline is checked).
const EVENT_SLICE: Duration = Duration::from_millis(50);

/// The event half of a blocking [`PingPort`]: a listener on the incoming direction's event
/// service, a notifier on the outgoing one's.
struct Events {
    listener: iceoryx2::port::listener::Listener<ipc::Service>,
    notifier: iceoryx2::port::notifier::Notifier<ipc::Service>,
    _in: EventFactory,
    _out: EventFactory,
}

/// Open or create the event service `service` (both sides race to create it; retried until
/// `deadline`).
fn open_event(
    node: &Node<ipc::Service>,
    service: &str,
    deadline: Instant,
) -> Result<EventFactory, String> {
    let name = ServiceName::new(service)
        .map_err(|e| format!("iox: bad service name {service:?}: {e:?}"))?;
    loop {
        match node
            .service_builder(&name)
            .event()
            .max_notifiers(1)
            .max_listeners(1)
            .max_nodes(4)
            .open_or_create()
        {
            Ok(factory) => return Ok(factory),
            // The other side is creating it at this moment: retry (as
            // `open_service` does); anything else is final.
            Err(
                e @ (EvOocErr::SystemInFlux
                | EvOocErr::EventOpenError(
                    EvOpenErr::DoesNotExist
                    | EvOpenErr::HangsInCreation
                    | EvOpenErr::InternalFailure,
                )
                | EvOocErr::EventCreateError(
                    EvCreateErr::AlreadyExists | EvCreateErr::IsBeingCreatedByAnotherInstance,
                )),
            ) => {
                check_deadline(
                    deadline,
                    &format!("opening event service {service:?} ({e:?})"),
                )?;
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => {
                return Err(format!(
                    "iox: cannot open/create event service {service:?}: {e:?}"
                ))
            }
        }
    }
}

/// Busy-poll (bounded by `deadline`) for the next message; call `on_receipt` as soon as it is
/// there, then read one `u64` per 4096-byte page of it, release it and return the first word.
fn receive_seq(
    subscriber: &Sub,
    size: usize,
    deadline: Instant,
    events: Option<&Events>,
    on_receipt: impl FnOnce(),
) -> Result<u64, String> {
    let mut idle: u32 = 0;
    let sample = loop {
        match subscriber.receive() {
            Ok(Some(sample)) => break sample,
            Ok(None) => match events {
                // Blocking mode: sleep until the peer's notifier fires (in
                // slices, to check the deadline).
                Some(ev) => {
                    check_deadline(deadline, "waiting for a message")?;
                    ev.listener
                        .timed_wait(|_| {}, EVENT_SLICE)
                        .map_err(|e| format!("iox: listener wait failed: {e:?}"))?;
                }
                None => {
                    idle = idle.wrapping_add(1);
                    if idle.is_multiple_of(1024) {
                        check_deadline(deadline, "waiting for a message")?;
                        std::thread::yield_now();
                    } else {
                        std::hint::spin_loop();
                    }
                }
            },
            Err(e) => return Err(format!("iox: receive failed: {e:?}")),
        }
    };
    on_receipt();
    let data: &[u8] = sample.payload();
    if data.len() != size {
        return Err(format!(
            "iox: a message has {} bytes, expected {size}",
            data.len()
        ));
    }
    let mut first = 0;
    for off in (0..=size - WORD).step_by(PAGE) {
        let mut word = [0u8; WORD];
        word.copy_from_slice(&data[off..off + WORD]);
        let value = black_box(u64::from_ne_bytes(word));
        if off == 0 {
            first = value;
        }
    }
    Ok(first)
}

/// One side of a ping-pong over two services, `<name>-req` (client → server) and `<name>-rep`
/// (server → client), `<name>` from the socket path the coordinator picked: messages of `size`
/// bytes (at least a word) carrying a sequence number in every page. The ping-pong loops (who
/// sends first, what is measured) are the caller's.
pub struct PingPort {
    // Dropped in this order: the events, the publisher, the subscriber, the services, the node.
    events: Option<Events>,
    publisher: Pub,
    subscriber: Option<Sub>,
    out_factory: Factory,
    _in_factory: Factory,
    _node: Node<ipc::Service>,
    initialised: Initialised,
    size: usize,
    deadline: Instant,
    /// `Some` with loan-ahead: the next message's sample, loaned right
    /// after the previous send (as iceoryx2's own benchmark does).
    ahead: Option<Option<Loaned>>,
}

impl PingPort {
    /// Open the client's (`client`) or the server's side. It creates its subscriber first, then
    /// its publisher (which waits for the peer's subscriber). Everything is bounded by
    /// `timeout` from now.
    ///
    /// `blocking`: each side also opens an event service per direction (`<name>-req-ev`,
    /// `<name>-rep-ev`), notifies after every send and sleeps in its listener (iceoryx2's
    /// blocking wait) when nothing has arrived, instead of busy-polling.
    pub fn open(
        path: &str,
        size: usize,
        client: bool,
        blocking: bool,
        loan_ahead: bool,
        timeout: Duration,
    ) -> Result<Self, String> {
        let deadline = Instant::now() + timeout;
        let base = std::path::Path::new(path)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "zcio-bench-ping".into());
        let (req, rep) = (format!("{base}-req"), format!("{base}-rep"));
        let (incoming, outgoing) = if client { (rep, req) } else { (req, rep) };
        let size = size.max(WORD);
        let node = create_node()?;
        let events = if blocking {
            let in_ev = open_event(&node, &format!("{incoming}-ev"), deadline)?;
            let out_ev = open_event(&node, &format!("{outgoing}-ev"), deadline)?;
            Some(Events {
                listener: in_ev
                    .listener_builder()
                    .create()
                    .map_err(|e| format!("iox: listener creation failed: {e:?}"))?,
                notifier: out_ev
                    .notifier_builder()
                    .create()
                    .map_err(|e| format!("iox: notifier creation failed: {e:?}"))?,
                _in: in_ev,
                _out: out_ev,
            })
        } else {
            None
        };
        let in_factory = open_service(&node, &incoming, deadline)?;
        let subscriber = in_factory
            .subscriber_builder()
            .buffer_size(SUB_BUFFER)
            .create()
            .map_err(|e| format!("iox: subscriber creation failed: {e:?}"))?;
        let out_factory = open_service(&node, &outgoing, deadline)?;
        let publisher = publisher_port(&out_factory, size, deadline)?;
        Ok(Self {
            events,
            publisher,
            subscriber: Some(subscriber),
            out_factory,
            _in_factory: in_factory,
            _node: node,
            initialised: Initialised::default(),
            size,
            deadline,
            ahead: loan_ahead.then_some(None),
        })
    }

    /// Send a message carrying `seq`.
    pub fn send(&mut self, seq: u64) -> Result<(), String> {
        let taken = self.ahead.as_mut().and_then(Option::take);
        send_seq(
            &self.publisher,
            &mut self.initialised,
            taken,
            self.size,
            seq,
            self.deadline,
        )?;
        if let Some(slot) = &mut self.ahead {
            if seq != u64::MAX {
                *slot = Some(loan(&self.publisher, self.size, seq + 1, self.deadline)?);
            }
        }
        if let Some(ev) = &self.events {
            // A listener not yet there misses nothing: the receiver polls
            // its subscriber before every wait.
            ev.notifier
                .notify()
                .map_err(|e| format!("iox: notify failed: {e:?}"))?;
        }
        Ok(())
    }

    /// Wait for the next message; its sequence number.
    pub fn recv(&mut self) -> Result<u64, String> {
        let sub = self.subscriber.as_ref().ok_or("iox: ping port finished")?;
        receive_seq(sub, self.size, self.deadline, self.events.as_ref(), || {})
    }

    /// Leave: drop the subscriber, then keep our data segment alive until the peer has released
    /// everything and left (bounded by the deadline).
    pub fn finish(mut self) -> Result<(), String> {
        self.ahead = None;
        drop(self.events.take());
        drop(self.subscriber.take());
        while self.out_factory.dynamic_config().number_of_subscribers() != 0 {
            check_deadline(self.deadline, "waiting for the peer to finish")?;
            std::thread::sleep(Duration::from_micros(200));
        }
        Ok(())
    }
}

/// Subscriber side. Opens the same service, busy-polls for `warmup + count` messages, reads one
/// `u64` per 4096-byte page of each and checks the first equals the sequence number. Returns
/// `(elapsed, count - 1)`: the time from receipt of message `warmup` to the release of the last
/// message, the number of message intervals that covers, and the CPU time (user + system
/// nanoseconds) over that interval. Bounded by `timeout`.
pub fn subscriber(
    service: &str,
    size: usize,
    warmup: usize,
    count: usize,
    timeout: Duration,
) -> Result<(Duration, u64, u64), String> {
    let mut cpu = crate::cpu::Window::default();
    let mut cpu_ns = 0;
    let deadline = Instant::now() + timeout;
    let total = check_args(size, warmup, count)?;
    let node = create_node()?;
    let factory = open_service(&node, service, deadline)?;
    let subscriber = factory
        .subscriber_builder()
        .buffer_size(SUB_BUFFER)
        .create()
        .map_err(|e| format!("iox: subscriber creation failed: {e:?}"))?;

    let (mut start, mut end) = (None, None);
    for expected in 0..total {
        let first = receive_seq(&subscriber, size, deadline, None, || {
            if expected == warmup as u64 {
                start = Some(Instant::now());
                cpu.start();
            }
        })?;
        if first != expected {
            return Err(format!(
                "iox: sequence mismatch: got {first}, expected {expected}"
            ));
        }
        if expected + 1 == total {
            end = Some(Instant::now());
            cpu_ns = cpu.elapsed_ns();
        }
    }
    // Dropping the port tells the publisher (which waits for zero subscribers) that we are done.
    drop(subscriber);
    match (start, end) {
        (Some(start), Some(end)) => Ok((end.duration_since(start), count as u64 - 1, cpu_ns)),
        _ => Err("iox: internal error: measurement interval not recorded".to_string()),
    }
}
