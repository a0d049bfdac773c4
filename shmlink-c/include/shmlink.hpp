// shmlink from C++17: RAII handles over the C API of shmlink.h (header-only).
//
// Every handle is move-only and closes its end when destroyed. A failure throws
// shmlink::error (its status() and what(): the status name and shmlink_last_error()); the
// forms that may find nothing to do return false or an empty std::optional instead: try_
// (SHMLINK_EMPTY, SHMLINK_FULL) and _for (SHMLINK_TIMEOUT). A message received in place is a
// shmlink::message: its bytes stay valid until it is destroyed, which releases it; the handle
// receives nothing else meanwhile (it gives the same message again). Thread rules are the C
// API's: one thread at a time per handle.
//
//     auto ch = shmlink::channel::connect("svc", std::chrono::seconds(5));
//     ch.send("ping");
//     shmlink::message reply = ch.recv();
//     std::string_view text = reply.view();

#ifndef SHMLINK_HPP
#define SHMLINK_HPP

#include "shmlink.h"

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shmlink {

// A failed call: its status and what shmlink said about it.
class error : public std::runtime_error {
  public:
    error(shmlink_status status, const std::string &what) : std::runtime_error(what), status_(status) {}
    shmlink_status status() const noexcept { return status_; }

  private:
    shmlink_status status_;
};

// SHMLINK_LAGGED: an overwrite topic's subscriber fell behind by missed() messages; the next
// receive gives the oldest message still there.
class lagged : public error {
  public:
    lagged(const std::string &what, std::uint64_t missed) : error(SHMLINK_LAGGED, what), missed_(missed) {}
    std::uint64_t missed() const noexcept { return missed_; }

  private:
    std::uint64_t missed_;
};

namespace detail {

inline void check(shmlink_status s) {
    if (s == SHMLINK_OK) return;
    std::string what = std::string(shmlink_status_name(s)) + ": " + shmlink_last_error();
    if (s == SHMLINK_LAGGED) throw lagged(what, shmlink_last_missed());
    throw error(s, what);
}

// False for "nothing now" (EMPTY, FULL, TIMEOUT); throws for the rest.
inline bool check_now(shmlink_status s) {
    if (s == SHMLINK_EMPTY || s == SHMLINK_FULL || s == SHMLINK_TIMEOUT) return false;
    check(s);
    return true;
}

inline std::uint64_t ms(std::chrono::milliseconds t) {
    return t.count() < 0 ? 0 : static_cast<std::uint64_t>(t.count());
}

} // namespace detail

// A message received in place, released when destroyed. Handle is shmlink_channel or
// shmlink_subscriber.
template <typename Handle, shmlink_status (*Release)(Handle *)> class basic_message {
  public:
    basic_message(Handle *h, const std::uint8_t *data, std::size_t size) noexcept : h_(h), data_(data), size_(size) {}
    basic_message(basic_message &&o) noexcept : h_(std::exchange(o.h_, nullptr)), data_(o.data_), size_(o.size_) {}
    basic_message &operator=(basic_message &&o) noexcept {
        if (this != &o) {
            reset();
            h_ = std::exchange(o.h_, nullptr);
            data_ = o.data_;
            size_ = o.size_;
        }
        return *this;
    }
    basic_message(const basic_message &) = delete;
    basic_message &operator=(const basic_message &) = delete;
    ~basic_message() { reset(); }

    const std::uint8_t *data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }
    std::string_view view() const noexcept { return {reinterpret_cast<const char *>(data_), size_}; }
    std::vector<std::uint8_t> to_vector() const { return {data_, data_ + size_}; }

  private:
    void reset() noexcept {
        if (h_ != nullptr) Release(std::exchange(h_, nullptr));
    }
    Handle *h_;
    const std::uint8_t *data_;
    std::size_t size_;
};

using message = basic_message<shmlink_channel, shmlink_release>;
using topic_message = basic_message<shmlink_subscriber, shmlink_subscriber_release>;

namespace detail {

// A move-only owner of a C handle, closed by Close.
template <typename Handle, void (*Close)(Handle *)> class owner {
  public:
    explicit owner(Handle *h) noexcept : h_(h) {}
    owner(owner &&o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
    owner &operator=(owner &&o) noexcept {
        if (this != &o) {
            Close(h_);
            h_ = std::exchange(o.h_, nullptr);
        }
        return *this;
    }
    owner(const owner &) = delete;
    owner &operator=(const owner &) = delete;
    ~owner() { Close(h_); }
    Handle *get() const noexcept { return h_; }

  private:
    Handle *h_;
};

// Receives into `buf`, growing it to the message's size when it is too small.
template <typename F> std::size_t recv_growing(std::vector<std::uint8_t> &buf, F recv_into) {
    std::size_t len = 0;
    shmlink_status s = recv_into(buf.data(), buf.size(), &len);
    if (s == SHMLINK_BUFFER_TOO_SMALL) {
        buf.resize(len);
        s = recv_into(buf.data(), buf.size(), &len);
    }
    check(s);
    buf.resize(len);
    return len;
}

} // namespace detail

// One end of a channel.
class channel {
  public:
    // Creates the channel `name` (rings of `capacity` bytes each way; 0: 1 MiB).
    static channel create(const std::string &name, std::size_t capacity = 0) {
        shmlink_channel *h = nullptr;
        detail::check(shmlink_channel_create(name.c_str(), capacity, &h));
        return channel(h);
    }
    // Connects to the channel or listener `name`, waiting up to `timeout` for it.
    static channel connect(const std::string &name, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
        shmlink_channel *h = nullptr;
        detail::check(shmlink_channel_connect(name.c_str(), detail::ms(timeout), &h));
        return channel(h);
    }
    explicit channel(shmlink_channel *h) noexcept : h_(h) {}

    void send(const void *data, std::size_t len) { detail::check(shmlink_send(h_.get(), data, len)); }
    void send(std::string_view bytes) { send(bytes.data(), bytes.size()); }
    bool try_send(std::string_view bytes) { return detail::check_now(shmlink_try_send(h_.get(), bytes.data(), bytes.size())); }
    bool send_for(std::string_view bytes, std::chrono::milliseconds timeout) {
        return detail::check_now(shmlink_send_timeout(h_.get(), bytes.data(), bytes.size(), detail::ms(timeout)));
    }

    message recv() {
        const std::uint8_t *data = nullptr;
        std::size_t len = 0;
        detail::check(shmlink_recv(h_.get(), &data, &len));
        return message(h_.get(), data, len);
    }
    std::optional<message> try_recv() {
        const std::uint8_t *data = nullptr;
        std::size_t len = 0;
        if (!detail::check_now(shmlink_try_recv(h_.get(), &data, &len))) return std::nullopt;
        return message(h_.get(), data, len);
    }
    std::optional<message> recv_for(std::chrono::milliseconds timeout) {
        const std::uint8_t *data = nullptr;
        std::size_t len = 0;
        if (!detail::check_now(shmlink_recv_timeout(h_.get(), &data, &len, detail::ms(timeout)))) return std::nullopt;
        return message(h_.get(), data, len);
    }
    // Copies the next message into `buf` (resized to it) and returns its length.
    std::size_t recv_into(std::vector<std::uint8_t> &buf) {
        return detail::recv_growing(buf, [&](void *b, std::size_t cap, std::size_t *len) {
            return shmlink_recv_into(h_.get(), b, cap, len);
        });
    }

    shmlink_channel *handle() const noexcept { return h_.get(); }

  private:
    detail::owner<shmlink_channel, shmlink_channel_close> h_;
};

// A listener: each client that connects to its name is an accepted channel.
class listener {
  public:
    static listener bind(const std::string &name) {
        shmlink_listener *h = nullptr;
        detail::check(shmlink_listener_bind(name.c_str(), &h));
        return listener(h);
    }
    explicit listener(shmlink_listener *h) noexcept : h_(h) {}
    // The next client's channel, or nothing after `timeout`.
    std::optional<channel> accept(std::chrono::milliseconds timeout) {
        shmlink_channel *c = nullptr;
        if (!detail::check_now(shmlink_listener_accept(h_.get(), detail::ms(timeout), &c))) return std::nullopt;
        return channel(c);
    }

  private:
    detail::owner<shmlink_listener, shmlink_listener_close> h_;
};

// A topic's publisher.
class publisher {
  public:
    static publisher create(const std::string &name, std::size_t capacity = 0, bool overwrite = false) {
        shmlink_publisher *h = nullptr;
        detail::check(shmlink_publisher_create(name.c_str(), capacity, overwrite ? 1 : 0, &h));
        return publisher(h);
    }
    explicit publisher(shmlink_publisher *h) noexcept : h_(h) {}
    void publish(std::string_view bytes) { detail::check(shmlink_publish(h_.get(), bytes.data(), bytes.size())); }
    bool try_publish(std::string_view bytes) {
        return detail::check_now(shmlink_try_publish(h_.get(), bytes.data(), bytes.size()));
    }
    std::size_t subscribers() const noexcept { return shmlink_publisher_subscribers(h_.get()); }

  private:
    detail::owner<shmlink_publisher, shmlink_publisher_close> h_;
};

// A topic's subscriber.
class subscriber {
  public:
    static subscriber connect(const std::string &name, std::size_t history = 0,
                              std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
        shmlink_subscriber *h = nullptr;
        detail::check(shmlink_subscriber_connect(name.c_str(), history, detail::ms(timeout), &h));
        return subscriber(h);
    }
    explicit subscriber(shmlink_subscriber *h) noexcept : h_(h) {}
    topic_message recv() {
        const std::uint8_t *data = nullptr;
        std::size_t len = 0;
        detail::check(shmlink_subscriber_recv(h_.get(), &data, &len));
        return topic_message(h_.get(), data, len);
    }
    std::optional<topic_message> recv_for(std::chrono::milliseconds timeout) {
        const std::uint8_t *data = nullptr;
        std::size_t len = 0;
        if (!detail::check_now(shmlink_subscriber_recv_timeout(h_.get(), &data, &len, detail::ms(timeout))))
            return std::nullopt;
        return topic_message(h_.get(), data, len);
    }
    std::size_t recv_into(std::vector<std::uint8_t> &buf) {
        return detail::recv_growing(buf, [&](void *b, std::size_t cap, std::size_t *len) {
            return shmlink_subscriber_recv_into(h_.get(), b, cap, len);
        });
    }

  private:
    detail::owner<shmlink_subscriber, shmlink_subscriber_close> h_;
};

} // namespace shmlink

#endif
