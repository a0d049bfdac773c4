/*
 * shmlink: messages between processes through shared memory, from C.
 *
 * Generated from shmlink-c/src/lib.rs by cbindgen: do not edit (docs/c.md explains the API).
 *
 * Every function returns a shmlink_status (SHMLINK_OK on success) unless it says otherwise;
 * shmlink_last_error() is a sentence about the last failure on the calling thread.
 *
 * Threads: a handle is used by one thread at a time (it may move between threads); different
 * handles are independent. Pointers: every pointer argument is checked for NULL
 * (SHMLINK_INVALID_ARGUMENT); bytes received in place belong to shmlink and stay valid until
 * the release or the close of their handle; everything else is the caller's.
 */

#ifndef SHMLINK_H
#define SHMLINK_H

#include <stddef.h>
#include <stdint.h>

// What a call did.
typedef enum shmlink_status {
  // It did what it says.
  SHMLINK_OK = 0,
  // A `try_` receive found no message waiting.
  SHMLINK_EMPTY = 1,
  // A `try_` send found no room (the receiver is behind).
  SHMLINK_FULL = 2,
  // A `_timeout` call, or a connect or an accept, ran out of time.
  SHMLINK_TIMEOUT = 3,
  // The peer closed its end; everything it sent before has been received.
  SHMLINK_DISCONNECTED = 4,
  // The peer's process died; everything it sent before has been received.
  SHMLINK_PEER_GONE = 5,
  // No channel, listener or topic under that name.
  SHMLINK_NOT_FOUND = 6,
  // The name is taken by a live creator.
  SHMLINK_ALREADY_EXISTS = 7,
  // The message is larger than the channel or topic takes.
  SHMLINK_TOO_LARGE = 8,
  // The caller's buffer is smaller than the message: its length is in `*len`, and the
  // message stays, for the next receive.
  SHMLINK_BUFFER_TOO_SMALL = 9,
  // An overwrite topic's subscriber fell behind: `shmlink_last_missed()` messages were lost; the next
  // receive gives the oldest message still there.
  SHMLINK_LAGGED = 10,
  // The topic's publisher dropped this subscriber.
  SHMLINK_DROPPED = 11,
  // The listener or topic has as many clients or subscribers as it takes.
  SHMLINK_TOO_MANY = 12,
  // A NULL pointer, a name that is not a valid shmlink name, a capacity that is not a power
  // of two in range, a length past the reservation.
  SHMLINK_INVALID_ARGUMENT = 13,
  // The handle holds a received message or a reservation that must be released or
  // committed first.
  SHMLINK_BUSY = 14,
  // Anything else (a corrupt or foreign mapping, a system error): `shmlink_last_error()`
  // says what.
  SHMLINK_ERROR = 15,
  // A bug in shmlink, caught before it reached C: `shmlink_last_error()` says where.
  SHMLINK_PANIC = 16,
} shmlink_status;

// One end of a channel. Opaque.
typedef struct shmlink_channel shmlink_channel;

// A listener: one server, many clients, each with a channel of its own. Opaque.
typedef struct shmlink_listener shmlink_listener;

// A topic's publisher. Opaque.
typedef struct shmlink_publisher shmlink_publisher;

// One thread waiting on many channels and subscribers at once. Opaque.
typedef struct shmlink_selector shmlink_selector;

// A topic's subscriber. Opaque.
typedef struct shmlink_subscriber shmlink_subscriber;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// The sentence that says what the last failing call on this thread did wrong (an empty string
// if none failed). The pointer stays valid until the next failing call on this thread.
const char *shmlink_last_error(void);

// How many messages the last `SHMLINK_LAGGED` on this thread said were missed.
uint64_t shmlink_last_missed(void);

// The name of a status, such as `"SHMLINK_TIMEOUT"` (a static string; `"SHMLINK_?"` for a
// value that is not a status).
const char *shmlink_status_name(enum shmlink_status status);

// Creates the channel `name` (the first end; another process connects to it) with rings of
// `capacity` bytes each way (a power of two from 256; 0 for the default, 1 MiB). Its ends wait
// by sleeping (block).
//
// # Safety
// `name` is a NUL-terminated string; `out` points to writable storage for a handle.
enum shmlink_status shmlink_channel_create(const char *name,
                                           size_t capacity,
                                           struct shmlink_channel **out);

// Connects to the channel or listener `name`, waiting up to `timeout_ms` for it to be there
// (and, for a listener, to accept).
//
// # Safety
// As [`shmlink_channel_create`].
enum shmlink_status shmlink_channel_connect(const char *name,
                                            uint64_t timeout_ms,
                                            struct shmlink_channel **out);

// Closes the end: the peer receives what was sent, then `SHMLINK_DISCONNECTED`. A held
// message is released and an open reservation dropped. NULL is ignored.
//
// # Safety
// `ch` is NULL or a handle not closed before; it is not used afterwards.
void shmlink_channel_close(struct shmlink_channel *ch);

// Sends `data[..len]` as one message, waiting while the ring is full.
//
// # Safety
// The handle is live and used by this thread alone; `data` points to `len` readable bytes (or
// is NULL with `len` 0).
enum shmlink_status shmlink_send(struct shmlink_channel *h, const void *data, size_t len);

// Sends `data[..len]` if there is room now (`SHMLINK_FULL` if not).
//
// # Safety
// The handle is live and used by this thread alone; `data` points to `len` readable bytes (or
// is NULL with `len` 0).
enum shmlink_status shmlink_try_send(struct shmlink_channel *h, const void *data, size_t len);

// Sends `data[..len]`, waiting at most `timeout_ms` for room (`SHMLINK_TIMEOUT`).
//
// # Safety
// The handle is live and used by this thread alone; `data` points to `len` readable bytes (or
// is NULL with `len` 0).
enum shmlink_status shmlink_send_timeout(struct shmlink_channel *h,
                                         const void *data,
                                         size_t len,
                                         uint64_t timeout_ms);

// Reserves room for a message of up to `len` bytes, to be written in place at `*data` and sent
// by [`shmlink_commit`]; waits while the ring is full. The handle sends nothing else until the
// commit.
//
// # Safety
// `ch` is live and used by this thread alone; `data` points to writable storage for a
// pointer. `*data` is valid for `len` bytes until the commit or the close.
enum shmlink_status shmlink_reserve(struct shmlink_channel *ch, size_t len, void **data);

// Sends the first `used` bytes written at the reserved `*data` as one message
// (`SHMLINK_INVALID_ARGUMENT` if `used` is more than was reserved, and nothing is sent; the
// reservation stays open).
//
// # Safety
// `ch` is live and used by this thread alone.
enum shmlink_status shmlink_commit(struct shmlink_channel *ch, size_t used);

// Receives the next message in place: `*data` and `*len` are its bytes, valid until the
// release (or the close). Waits for a message. While a message is held, every receive gives
// it again.
//
// # Safety
// The handle is live and used by this thread alone; `data` and `len` point to writable
// storage.
enum shmlink_status shmlink_recv(struct shmlink_channel *h, const uint8_t **data, size_t *len);

// As `shmlink_recv`, but `SHMLINK_EMPTY` at once when no message is waiting.
//
// # Safety
// As `shmlink_recv`.
enum shmlink_status shmlink_try_recv(struct shmlink_channel *h, const uint8_t **data, size_t *len);

// As `shmlink_recv`, but `SHMLINK_TIMEOUT` after `timeout_ms`.
//
// # Safety
// As `shmlink_recv`.
enum shmlink_status shmlink_recv_timeout(struct shmlink_channel *h,
                                         const uint8_t **data,
                                         size_t *len,
                                         uint64_t timeout_ms);

// Receives the next message into `buf` (`cap` bytes), its length in `*len`; waits for a
// message. A message longer than `cap` is not consumed: `SHMLINK_BUFFER_TOO_SMALL`, with its
// length in `*len`.
//
// # Safety
// The handle is live and used by this thread alone; `buf` points to `cap` writable bytes (or
// is NULL with `cap` 0); `len` points to writable storage.
enum shmlink_status shmlink_recv_into(struct shmlink_channel *h,
                                      void *buf,
                                      size_t cap,
                                      size_t *len);

// As `shmlink_recv_into`, but `SHMLINK_EMPTY` at once when no message is waiting.
//
// # Safety
// As `shmlink_recv_into`.
enum shmlink_status shmlink_try_recv_into(struct shmlink_channel *h,
                                          void *buf,
                                          size_t cap,
                                          size_t *len);

// As `shmlink_recv_into`, but `SHMLINK_TIMEOUT` after `timeout_ms`.
//
// # Safety
// As `shmlink_recv_into`.
enum shmlink_status shmlink_recv_into_timeout(struct shmlink_channel *h,
                                              void *buf,
                                              size_t cap,
                                              size_t *len,
                                              uint64_t timeout_ms);

// Releases the message held since a receive in place (its bytes are no longer valid);
// `SHMLINK_INVALID_ARGUMENT` if none is held.
//
// # Safety
// The handle is live and used by this thread alone.
enum shmlink_status shmlink_release(struct shmlink_channel *h);

// Binds the listener `name`: clients connect with `shmlink_channel_connect(name, ...)`.
//
// # Safety
// `name` is a NUL-terminated string; `out` points to writable storage for a handle.
enum shmlink_status shmlink_listener_bind(const char *name, struct shmlink_listener **out);

// Accepts the next client, waiting up to `timeout_ms` (`SHMLINK_TIMEOUT`): `*out` is the
// server's end of the client's channel, closed with `shmlink_channel_close`.
//
// # Safety
// `l` is a live listener; `out` points to writable storage for a handle.
enum shmlink_status shmlink_listener_accept(struct shmlink_listener *l,
                                            uint64_t timeout_ms,
                                            struct shmlink_channel **out);

// Closes the listener: its name goes; connections already accepted stay. NULL is ignored.
//
// # Safety
// `l` is NULL or a listener not closed before; it is not used afterwards.
void shmlink_listener_close(struct shmlink_listener *l);

// Creates the topic `name` with a ring of `capacity` bytes (0: 1 MiB): lossless (a full ring
// makes the publisher wait for the slowest subscriber) unless `overwrite` is non-zero (the
// publisher never waits; a subscriber that falls a ring behind gets `SHMLINK_LAGGED`).
//
// # Safety
// `name` is a NUL-terminated string; `out` points to writable storage for a handle.
enum shmlink_status shmlink_publisher_create(const char *name,
                                             size_t capacity,
                                             int32_t overwrite,
                                             struct shmlink_publisher **out);

// How many subscribers the topic has now (0 for a NULL handle).
//
// # Safety
// `p` is NULL or a live publisher used by this thread alone.
size_t shmlink_publisher_subscribers(struct shmlink_publisher *p);

// Closes the publisher: each subscriber receives what was published, then
// `SHMLINK_DISCONNECTED`. NULL is ignored.
//
// # Safety
// `p` is NULL or a publisher not closed before; it is not used afterwards.
void shmlink_publisher_close(struct shmlink_publisher *p);

// Publishes `data[..len]` to every subscriber, waiting (lossless) while the slowest subscriber
// leaves no room.
//
// # Safety
// The handle is live and used by this thread alone; `data` points to `len` readable bytes (or
// is NULL with `len` 0).
enum shmlink_status shmlink_publish(struct shmlink_publisher *h, const void *data, size_t len);

// Publishes `data[..len]` if there is room now (`SHMLINK_FULL` if not).
//
// # Safety
// The handle is live and used by this thread alone; `data` points to `len` readable bytes (or
// is NULL with `len` 0).
enum shmlink_status shmlink_try_publish(struct shmlink_publisher *h, const void *data, size_t len);

// Publishes `data[..len]`, waiting at most `timeout_ms` for room (`SHMLINK_TIMEOUT`).
//
// # Safety
// The handle is live and used by this thread alone; `data` points to `len` readable bytes (or
// is NULL with `len` 0).
enum shmlink_status shmlink_publish_timeout(struct shmlink_publisher *h,
                                            const void *data,
                                            size_t len,
                                            uint64_t timeout_ms);

// Subscribes to the topic `name`, waiting up to `timeout_ms` for its publisher: the
// subscriber gets every message published from now on, and `history` (at most what the topic
// keeps) of those before.
//
// # Safety
// `name` is a NUL-terminated string; `out` points to writable storage for a handle.
enum shmlink_status shmlink_subscriber_connect(const char *name,
                                               size_t history,
                                               uint64_t timeout_ms,
                                               struct shmlink_subscriber **out);

// Closes the subscriber: the publisher no longer waits for it. NULL is ignored.
//
// # Safety
// `s` is NULL or a subscriber not closed before; it is not used afterwards.
void shmlink_subscriber_close(struct shmlink_subscriber *s);

// Receives the next message in place: `*data` and `*len` are its bytes, valid until the
// release (or the close). Waits for a message. While a message is held, every receive gives
// it again.
//
// # Safety
// The handle is live and used by this thread alone; `data` and `len` point to writable
// storage.
enum shmlink_status shmlink_subscriber_recv(struct shmlink_subscriber *h,
                                            const uint8_t **data,
                                            size_t *len);

// As `shmlink_subscriber_recv`, but `SHMLINK_EMPTY` at once when no message is waiting.
//
// # Safety
// As `shmlink_subscriber_recv`.
enum shmlink_status shmlink_subscriber_try_recv(struct shmlink_subscriber *h,
                                                const uint8_t **data,
                                                size_t *len);

// As `shmlink_subscriber_recv`, but `SHMLINK_TIMEOUT` after `timeout_ms`.
//
// # Safety
// As `shmlink_subscriber_recv`.
enum shmlink_status shmlink_subscriber_recv_timeout(struct shmlink_subscriber *h,
                                                    const uint8_t **data,
                                                    size_t *len,
                                                    uint64_t timeout_ms);

// Receives the next message into `buf` (`cap` bytes), its length in `*len`; waits for a
// message. A message longer than `cap` is not consumed: `SHMLINK_BUFFER_TOO_SMALL`, with its
// length in `*len`.
//
// # Safety
// The handle is live and used by this thread alone; `buf` points to `cap` writable bytes (or
// is NULL with `cap` 0); `len` points to writable storage.
enum shmlink_status shmlink_subscriber_recv_into(struct shmlink_subscriber *h,
                                                 void *buf,
                                                 size_t cap,
                                                 size_t *len);

// As `shmlink_subscriber_recv_into`, but `SHMLINK_EMPTY` at once when no message is waiting.
//
// # Safety
// As `shmlink_subscriber_recv_into`.
enum shmlink_status shmlink_subscriber_try_recv_into(struct shmlink_subscriber *h,
                                                     void *buf,
                                                     size_t cap,
                                                     size_t *len);

// As `shmlink_subscriber_recv_into`, but `SHMLINK_TIMEOUT` after `timeout_ms`.
//
// # Safety
// As `shmlink_subscriber_recv_into`.
enum shmlink_status shmlink_subscriber_recv_into_timeout(struct shmlink_subscriber *h,
                                                         void *buf,
                                                         size_t cap,
                                                         size_t *len,
                                                         uint64_t timeout_ms);

// Releases the message held since a receive in place (its bytes are no longer valid);
// `SHMLINK_INVALID_ARGUMENT` if none is held.
//
// # Safety
// The handle is live and used by this thread alone.
enum shmlink_status shmlink_subscriber_release(struct shmlink_subscriber *h);

// Writes the counters of the channel, listener or topic `name` as one JSON document (the
// schema of `shmlink stat --json`, docs/observe.md) into `buf` (`cap` bytes, NUL-terminated);
// its length without the NUL in `*len`. `SHMLINK_BUFFER_TOO_SMALL` if it does not fit (`*len`
// says how long it is).
//
// # Safety
// `name` is a NUL-terminated string; `buf` points to `cap` writable bytes (or is NULL with
// `cap` 0); `len` points to writable storage.
enum shmlink_status shmlink_stats_json(const char *name, char *buf, size_t cap, size_t *len);

// Makes a selector.
//
// # Safety
// `out` points to writable storage for a handle.
enum shmlink_status shmlink_selector_new(struct shmlink_selector **out);

// Closes a selector. NULL is ignored.
//
// # Safety
// `sel` is NULL or a selector not closed before; it is not used afterwards.
void shmlink_selector_close(struct shmlink_selector *sel);

// Waits up to `timeout_ms` until at least one of the `n_channels` channels and `n_subscribers`
// subscribers is ready (a message waits, or its peer closed or died: the next receive says
// which). Their indices go to `ready` (room for `n_channels + n_subscribers`): `i` for
// `channels[i]`, `n_channels + j` for `subscribers[j]`; their count to `*n_ready`.
// `SHMLINK_TIMEOUT` (and `*n_ready` 0) if none became ready; `SHMLINK_BUSY` if a handle in the
// set holds a received message or a reservation; `SHMLINK_INVALID_ARGUMENT` if a handle is
// NULL or appears twice.
//
// # Safety
// `sel` is a live selector; `channels` and `subscribers` point to that many live handles (or
// are NULL with a count of 0), used by no other thread during the call; `ready` points to room
// for `n_channels + n_subscribers` indices; `n_ready` to writable storage.
enum shmlink_status shmlink_selector_wait(struct shmlink_selector *sel,
                                          struct shmlink_channel *const *channels,
                                          size_t n_channels,
                                          struct shmlink_subscriber *const *subscribers,
                                          size_t n_subscribers,
                                          uint64_t timeout_ms,
                                          size_t *ready,
                                          size_t *n_ready);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* SHMLINK_H */
