//! What an entry of the transport table says about its transport, and the `transports!` macro
//! that turns the table (in `transport/mod.rs`) into the module list, [`Kind`](super::Kind),
//! [`Kind::ALL`](super::Kind::ALL), [`Kind::spec`](super::Kind::spec) and
//! [`dispatch`](super::dispatch). Everything else that names transports (the command line's
//! `--transport` parsing, the bare and batch rows, the reports, `ipc-parent transports`, the
//! child's dispatch) reads the table through these.

/// What carries the messages: the rows a transport is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Memory shared by the two processes (the library's ring, a mailbox, a memfd).
    Memory,
    /// The kernel (pipes, sockets, queues): the rows "the best kernel transport" is chosen from.
    Kernel,
    /// A limit rather than a transport (`floor`): shown as `NAME [limit]`, measured by ping-pong
    /// only.
    Limit,
}

/// A measuring mode, or a form of the stream, a transport takes part in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `ipc-parent ping-pong`.
    PingPong,
    /// `ipc-parent sweep`: raw messages of several sizes echoed back.
    Sweep,
    /// `ipc-parent stream`, framed messages (the row named after the transport).
    Stream,
    /// The stream's `<name>-bare` row: fixed-size, unframed messages, one system call each
    /// ([`Transport::send_bare`](super::Transport::send_bare)).
    Bare,
    /// The stream's `<name>-batch` row: many fixed-size messages per call
    /// ([`Transport::send_batch`](super::Transport::send_batch)).
    Batch,
}

impl Mode {
    /// The name `ipc-parent transports --describe` prints.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::PingPong => "ping-pong",
            Mode::Sweep => "sweep",
            Mode::Stream => "stream",
            Mode::Bare => "bare",
            Mode::Batch => "batch",
        }
    }
}

/// One entry of the transport table.
#[derive(Debug)]
pub struct Spec {
    /// The name on the command line and in the documents.
    pub name: &'static str,
    /// Other names `--transport` accepts.
    pub aliases: &'static [&'static str],
    /// What moves the bytes, in a line.
    pub about: &'static str,
    /// Memory, kernel or limit.
    pub class: Class,
    /// The modes and stream forms it serves.
    pub modes: &'static [Mode],
    /// Its stream's bare row, `<name>-bare` (a row only where [`Mode::Bare`] is served).
    pub bare: &'static str,
    /// Its stream's batch row, `<name>-batch` (a row only where [`Mode::Batch`] is served).
    pub batch: &'static str,
    /// Whether both processes busy-spin while they wait, whatever the wait strategy.
    pub spins: bool,
    /// Whether the child is spawned with piped standard input and output.
    pub stdio: bool,
}

/// Turns the transport table into its module list, `Kind`, `Kind::ALL`, `Kind::spec` and
/// `dispatch`. An entry:
///
/// ```text
/// Variant: module::Type {
///     name: "name", aliases: ["other"], about: "what moves the bytes",
///     class: Memory | Kernel | Limit, modes: [PingPong, Sweep, Stream, Bare, Batch],
///     spins: false, stdio: false,
/// },
/// ```
///
/// declares `pub mod module;` (the file `transport/module.rs`), whose `Type` implements
/// [`Transport`](super::Transport) with `KIND = Kind::Variant`.
macro_rules! transports {
    ($(
        $kind:ident: $module:ident :: $ty:ident {
            name: $name:literal,
            aliases: [$($alias:literal),* $(,)?],
            about: $about:literal,
            class: $class:ident,
            modes: [$($mode:ident),* $(,)?],
            spins: $spins:literal,
            stdio: $stdio:literal $(,)?
        }
    ),* $(,)?) => {
        $(pub mod $module;)*

        /// Which transport: one variant per entry of the table, in its order.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Kind {
            $(#[doc = $about] $kind,)*
        }

        /// The table's entries, in the order of [`Kind`].
        const SPECS: &[spec::Spec] = &[$(
            spec::Spec {
                name: $name,
                aliases: &[$($alias),*],
                about: $about,
                class: spec::Class::$class,
                modes: &[$(spec::Mode::$mode),*],
                bare: concat!($name, "-bare"),
                batch: concat!($name, "-batch"),
                spins: $spins,
                stdio: $stdio,
            },
        )*];

        impl Kind {
            /// Every transport, in the order of the table (the order runs interleave them).
            pub const ALL: [Kind; SPECS.len()] = [$(Kind::$kind),*];

            /// The table's entry for this transport.
            pub fn spec(self) -> &'static spec::Spec {
                &SPECS[self as usize]
            }
        }

        /// Runs `visitor` with the concrete transport type of `kind`: the way to pick a backend
        /// at run time while the message loop stays monomorphic.
        pub fn dispatch<V: Visitor>(kind: Kind, visitor: V) -> V::Output {
            match kind {
                $(Kind::$kind => visitor.visit::<$module::$ty>(),)*
            }
        }
    };
}
