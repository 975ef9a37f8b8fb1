// zcio.hpp: the C++20 API of zcio, header-only, over the C library (zcio.h).
//
// Build and link (scripts/build-c installs both headers, the library, pkg-config
// files and a CMake package):
//     g++ -std=c++20 prog.cpp $(pkg-config --cflags --libs zcio)
//     find_package(zcio CONFIG REQUIRED)
//     target_link_libraries(prog PRIVATE zcio::zcio)   # + target_compile_features(prog PRIVATE cxx_std_20)
// Guide: docs/cpp.md. Every call here is an inline call of the C function it
// names; what the C header says about a call (ownership aside) holds here.
//
// Conventions:
//  - Handles are RAII, move-only (copies are deleted, moves are noexcept): no
//    manual close, free or release anywhere. A moved-from handle is empty.
//  - Failures throw zcio::error (a std::system_error) with the situation
//    (zcio::error_kind, the vocabulary of Rust's zcio::ErrorKind), the C code
//    (an errno or ZCIO_E...) and zcio_last_error()'s details.
//  - The three forms of every wait, as in Rust: x() waits up to the bound of
//    the call's configuration (then throws error_kind::timed_out); try_x()
//    does not wait and returns std::nullopt (or the value back, for sends)
//    when nothing is available now; x_for(d) waits at most d and returns
//    std::nullopt when it passes. zcio::forever waits without a bound.
//  - Bytes you fill are std::span<std::byte>; bytes you receive are
//    std::span<const std::byte>, in place. The volatile rule of zcio.h
//    applies to them: a peer may still write them (message::is_volatile,
//    every ring block): copy out what you validate (message::read), then use
//    the copy.
//  - Reserve -> fill -> send as types: pool::alloc -> buffer (writable) ->
//    std::move(buf).freeze() -> message (read-only) -> channel::send(std::move(msg)).
//    Lanes: lane_sender::loan -> lane_loan (writable) -> std::move(loan).send(n).
//    Rings: ring_producer::reserve -> ring_reservation (writable) ->
//    std::move(r).commit(len[, tag]); destroyed uncommitted, it publishes nothing.
#pragma once

#include <zcio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#if __cplusplus < 202002L
#error "zcio.hpp needs C++20 (-std=c++20, or target_compile_features(... cxx_std_20))"
#endif

namespace zcio {

// ------------------------------------------------------------------ errors

/// One word per situation: Rust's zcio::ErrorKind (docs/api-map.md#errors).
enum class error_kind {
    would_block,       // -EAGAIN: nothing available now; the call could not wait
    timed_out,         // -ETIMEDOUT: a bounded wait ended
    disconnected,      // -EPIPE: the peer is gone, or this end was closed
    peer_fault,        // -ZCIO_ECORRUPT: the peer corrupted shared state
    aborted,           // -ECONNABORTED: the peer held a lent buffer too long
    malformed,         // -EBADMSG: the peer sent a malformed message (dropped)
    invalid_input,     // -EINVAL: the caller passed something invalid
    too_large,         // -EMSGSIZE, -ENOBUFS: larger than the transport or the caller's buffer
    out_of_range,      // -ERANGE
    not_found,         // -ENOENT
    already_exists,    // -EEXIST
    permission_denied, // -EACCES, -EPERM
    busy,              // -EBUSY
    no_space,          // -ENOSPC
    out_of_memory,     // -ENOMEM
    unsupported,       // -EOPNOTSUPP
    protocol,          // -EPROTO
    lapped,            // -ZCIO_ELAPPED
    dropped,           // -ZCIO_EDROPPED
    producer_failed,   // -ZCIO_EPRODFAIL
    not_a_ring,        // -ZCIO_EBADRING
    module,            // -ZCIO_EMODULE
    cancelled,         // -ECANCELED
    internal,          // -ZCIO_EPANIC
    os,                // any other errno: a system call failed
};

/// The kind of a C return code (either sign), as code_of in crates/zcio-c maps them.
constexpr error_kind kind_of(int code) noexcept {
    switch (code < 0 ? -code : code) {
    case EAGAIN: return error_kind::would_block;
    case ETIMEDOUT: return error_kind::timed_out;
    case EPIPE: return error_kind::disconnected;
    case ZCIO_ECORRUPT: return error_kind::peer_fault;
    case ECONNABORTED: return error_kind::aborted;
    case EBADMSG: return error_kind::malformed;
    case EINVAL: return error_kind::invalid_input;
    case EMSGSIZE:
    case ENOBUFS: return error_kind::too_large;
    case ERANGE: return error_kind::out_of_range;
    case ENOENT: return error_kind::not_found;
    case EEXIST: return error_kind::already_exists;
    case EACCES:
    case EPERM: return error_kind::permission_denied;
    case EBUSY: return error_kind::busy;
    case ENOSPC: return error_kind::no_space;
    case ENOMEM: return error_kind::out_of_memory;
    case EOPNOTSUPP: return error_kind::unsupported;
    case EPROTO: return error_kind::protocol;
    case ZCIO_ELAPPED: return error_kind::lapped;
    case ZCIO_EDROPPED: return error_kind::dropped;
    case ZCIO_EPRODFAIL: return error_kind::producer_failed;
    case ZCIO_EBADRING: return error_kind::not_a_ring;
    case ZCIO_EMODULE: return error_kind::module;
    case ECANCELED: return error_kind::cancelled;
    case ZCIO_EPANIC: return error_kind::internal;
    default: return error_kind::os;
    }
}

/// The kind's name, as Rust spells it ("WouldBlock", "TimedOut", ...).
constexpr const char *to_string(error_kind k) noexcept {
    constexpr const char *names[] = {
        "WouldBlock", "TimedOut",       "Disconnected",  "PeerFault",   "Aborted",
        "Malformed",  "InvalidInput",   "TooLarge",      "OutOfRange",  "NotFound",
        "AlreadyExists", "PermissionDenied", "Busy",     "NoSpace",     "OutOfMemory",
        "Unsupported", "Protocol",      "Lapped",        "Dropped",     "ProducerFailed",
        "NotARing",   "Module",         "Cancelled",     "Internal",    "Os",
    };
    return names[static_cast<int>(k)];
}

namespace detail {
class category_impl final : public std::error_category {
  public:
    const char *name() const noexcept override { return "zcio"; }
    std::string message(int code) const override { return zcio_strerror(code); }
};
} // namespace detail

/// The error category of zcio's codes: errno values and ZCIO_E... (4096..4102),
/// named by zcio_strerror.
inline const std::error_category &category() noexcept {
    static const detail::category_impl c;
    return c;
}

/// A failed zcio call: what() says which call, the code's meaning and
/// zcio_last_error()'s details (which name, which size, what to do).
class error : public std::system_error {
  public:
    /// `code`: the C return code (either sign); `op`: the call that failed.
    error(int code, const char *op, std::string detail)
        : std::system_error(std::abs(code), category(), make_what(op, detail)),
          kind_(kind_of(code)), detail_(std::move(detail)) {}
    /// The situation (Rust's ErrorKind).
    error_kind kind() const noexcept { return kind_; }
    /// The C code, positive: the errno, or ZCIO_E... for what no errno says.
    int errnum() const noexcept { return code().value(); }
    /// zcio_last_error() at the time of the failure ("" if it said nothing more).
    const std::string &detail() const noexcept { return detail_; }

  private:
    static std::string make_what(const char *op, const std::string &detail) {
        std::string w = op;
        if (!detail.empty()) {
            w += " (";
            w += detail;
            w += ")";
        }
        return w;
    }
    error_kind kind_;
    std::string detail_;
};

namespace detail {
/// Throw the error of `rc` (< 0) from call `op`.
[[noreturn]] inline void raise(long rc, const char *op) {
    throw error(static_cast<int>(rc), op, zcio_last_error());
}
/// `rc` if it is not an error code, else throw.
template <class R> inline R check(R rc, const char *op) {
    if (rc < 0) raise(static_cast<long>(rc), op);
    return rc;
}
} // namespace detail

// ---------------------------------------------------------------- waiting

/// A wait without a bound (ZCIO_TIMEOUT_INFINITE): only for peers you trust.
inline constexpr std::chrono::milliseconds forever{ZCIO_TIMEOUT_INFINITE};

namespace detail {
/// A C `timeout_ms` for a wait of `d`: 0 for d <= 0 (no wait), rounded up
/// to whole milliseconds, ZCIO_TIMEOUT_INFINITE from INT_MAX ms on.
template <class Rep, class Period>
constexpr int timeout_ms(std::chrono::duration<Rep, Period> d) noexcept {
    if (d <= d.zero()) return 0;
    using ms = std::chrono::duration<double, std::milli>;
    double v = std::chrono::duration_cast<ms>(d).count();
    if (v >= static_cast<double>(ZCIO_TIMEOUT_INFINITE)) return ZCIO_TIMEOUT_INFINITE;
    int whole = static_cast<int>(v);
    return whole < v ? whole + 1 : (whole == 0 ? 1 : whole);
}
/// A C bound (> 0 ms, or ZCIO_TIMEOUT_INFINITE) for a configured bound `d`.
template <class Rep, class Period>
constexpr int bound_ms(std::chrono::duration<Rep, Period> d) noexcept {
    int ms = timeout_ms(d);
    return ms == 0 ? 1 : ms;
}

/// A C count of microseconds for `d`: 0 for d <= 0, rounded up.
template <class Rep, class Period>
constexpr std::uint64_t micros(std::chrono::duration<Rep, Period> d) noexcept {
    if (d <= d.zero()) return 0;
    return static_cast<std::uint64_t>(std::chrono::ceil<std::chrono::microseconds>(d).count());
}

template <class T, void (*Free)(T *)> struct deleter {
    void operator()(T *p) const noexcept { Free(p); }
};
template <class T, void (*Free)(T *)> using owned = std::unique_ptr<T, deleter<T, Free>>;

inline void free_buf(zcio_buf *b) { zcio_buf_free(b); }
inline void free_msg(zcio_msg *m) { zcio_msg_release(m); }
inline void free_pool(zcio_pool *p) { zcio_pool_destroy(p); }
inline void free_listener(zcio_listener *l) { zcio_listener_close(l); }
inline void free_channel(zcio_channel *c) { zcio_channel_close(c); }
inline void free_lane_tx(zcio_lane_sender *t) { zcio_lane_sender_free(t); }
inline void free_lane_rx(zcio_lane_receiver *r) { zcio_lane_receiver_free(r); }
inline void free_ring(zcio_ring *r) { zcio_ring_close(r); }
} // namespace detail

/// zcio_version(): the library's version ("0.1.0").
inline std::string_view version() noexcept { return zcio_version(); }

/// zcio_page_size(): the system page size, the granularity of buffers, arenas
/// and ring data areas.
inline std::size_t page_size() noexcept { return zcio_page_size(); }

/// zcio_set_non_dumpable(): prctl(PR_SET_DUMPABLE, 0), so that processes of
/// the same uid can neither ptrace this one nor open its descriptors under
/// /proc/PID/fd (for an originator keeping secured or volatile buffers safe
/// from same-uid peers).
inline void set_non_dumpable() { detail::check(zcio_set_non_dumpable(), "zcio_set_non_dumpable"); }

// ------------------------------------------------------- buffers and pools

class message;
class channel;

/// A pool buffer being filled (zcio_buf): writable by this process until it
/// is frozen. Destroying it unsent gives it back to its pool.
class buffer {
  public:
    buffer(buffer &&) noexcept = default;
    buffer &operator=(buffer &&) noexcept = default;
    buffer(const buffer &) = delete;
    buffer &operator=(const buffer &) = delete;

    /// The bytes to fill.
    std::span<std::byte> data() noexcept { return {data_, size()}; }
    std::span<const std::byte> data() const noexcept { return {data_, size()}; }
    std::size_t size() const noexcept { return zcio_buf_len(buf_.get()); }
    /// Shorten it before sending (no effect if `n` is not smaller; n > 0).
    void truncate(std::size_t n) { detail::check(zcio_buf_truncate(buf_.get(), n), "zcio_buf_truncate"); }
    /// Done filling: a read-only message of one slice, ready to send.
    message freeze() &&;

  private:
    friend class pool;
    explicit buffer(zcio_buf *b) noexcept
        : buf_(b), data_(static_cast<std::byte *>(zcio_buf_data(b))) {}
    detail::owned<zcio_buf, detail::free_buf> buf_;
    std::byte *data_;
};

using pool_stats = zcio_pool_stats;
using huge_pages = zcio_huge_pages;

/// The configuration of a pool (struct zcio_pool_config: Rust's PoolConfig),
/// every field; the defaults are C's (zcio_pool_config_init). An aggregate:
/// `zcio::pool::create("frames", {.max_chunks = 2, .populate = false})`. A
/// value out of range makes pool::create throw invalid_input (detail() says
/// what is allowed).
struct pool_config {
    /// Bytes per chunk region, rounded up to pages (> 0); a larger buffer gets a chunk of its own.
    std::uint64_t chunk_size = std::uint64_t{16} << 20;
    /// Most chunks the pool ever holds (> 0).
    std::uint64_t max_chunks = 16;
    /// Pre-fault chunks when they are made (MAP_POPULATE); false: on first touch.
    bool populate = true;
    /// Freed buffers kept per page count on the quick list.
    std::uint64_t quick_list_cap = 64;
    /// How long a waiting allocation polls before it sleeps (0: sleep at
    /// once); nullopt: the process's spin policy (zcio::spin_policy).
    std::optional<std::chrono::microseconds> spin{};
    /// Bytes of chunks the pool may write off over its life to replace chunks
    /// holding a dead receiver's buffers; nullopt: max_chunks x chunk_size.
    std::optional<std::uint64_t> retire_budget{};
    /// What pool::alloc waits for receivers to release buffers (> 0, or zcio::forever).
    std::chrono::milliseconds alloc_timeout{10'000};

    bool operator==(const pool_config &) const = default;

    /// The C struct: zcio_pool_config_init (its size and defaults), then field by field.
    zcio_pool_config to_c() const noexcept {
        zcio_pool_config c;
        zcio_pool_config_init(&c);
        c.chunk_size = chunk_size;
        c.max_chunks = max_chunks;
        c.populate = populate ? 1 : 0;
        c.quick_list_cap = quick_list_cap;
        if (spin) c.spin_us = detail::micros(*spin);
        if (retire_budget) {
            c.retire_budget = *retire_budget;
        } else {
            std::uint64_t top = std::numeric_limits<std::size_t>::max();
            c.retire_budget = chunk_size != 0 && max_chunks > top / chunk_size ? top : max_chunks * chunk_size;
        }
        c.alloc_timeout_ms = detail::bound_ms(alloc_timeout);
        return c;
    }
    /// From the C struct (as zcio_pool_get_config fills it).
    static pool_config from_c(const zcio_pool_config &c) noexcept {
        using us = std::chrono::microseconds;
        constexpr auto top = static_cast<std::uint64_t>(std::numeric_limits<us::rep>::max());
        pool_config r;
        r.chunk_size = c.chunk_size;
        r.max_chunks = c.max_chunks;
        r.populate = c.populate != 0;
        r.quick_list_cap = c.quick_list_cap;
        r.spin = us(static_cast<us::rep>(c.spin_us > top ? top : c.spin_us));
        r.retire_budget = c.retire_budget;
        r.alloc_timeout = std::chrono::milliseconds(c.alloc_timeout_ms);
        return r;
    }
};

/// A pool of shared-memory buffers (zcio_pool): chunks of `chunk_size`
/// bytes (0: 16 MiB), at most `max_chunks` (0: 16); pool::create takes a
/// whole pool_config.
class pool {
  public:
    explicit pool(const char *name = "pool", std::size_t chunk_size = 0, std::size_t max_chunks = 0) {
        zcio_pool *p = nullptr;
        detail::check(zcio_pool_create(name, chunk_size, max_chunks, &p), "zcio_pool_create");
        pool_.reset(p);
    }
    /// A pool configured by `cfg` (zcio_pool_create_with); `name` shows in /proc/PID/maps.
    static pool create(const char *name, const pool_config &cfg) {
        zcio_pool_config c = cfg.to_c();
        zcio_pool *p = nullptr;
        detail::check(zcio_pool_create_with(name, &c, &p), "zcio_pool_create_with");
        return pool(p);
    }
    pool(pool &&) noexcept = default;
    pool &operator=(pool &&) noexcept = default;

    /// Its configuration (zcio_pool_get_config).
    pool_config config() const {
        zcio_pool_config c;
        zcio_pool_config_init(&c);
        detail::check(zcio_pool_get_config(pool_.get(), &c), "zcio_pool_get_config");
        return pool_config::from_c(c);
    }
    /// Process the deallocation notices of every channel carrying this pool's
    /// buffers now (allocation does it by itself when it runs short); returns
    /// how many buffers came back (zcio_pool_reclaim_all).
    std::size_t reclaim_all() const {
        return static_cast<std::size_t>(detail::check(zcio_pool_reclaim_all(pool_.get()), "zcio_pool_reclaim_all"));
    }

    /// A buffer of `n` bytes, waiting up to the pool's bound (alloc_timeout, 10 s) for one.
    buffer alloc(std::size_t n) { return *get(n, ZCIO_TIMEOUT_DEFAULT, "zcio_buf_alloc_timeout"); }
    /// A buffer now, or nullopt while the pool is exhausted.
    std::optional<buffer> try_alloc(std::size_t n) { return get(n, 0, "zcio_buf_alloc_timeout"); }
    /// A buffer within `d`, or nullopt when `d` passed.
    template <class Rep, class Period>
    std::optional<buffer> alloc_for(std::size_t n, std::chrono::duration<Rep, Period> d) {
        return get(n, detail::timeout_ms(d), "zcio_buf_alloc_timeout");
    }
    /// A secured buffer: fresh memory sealed by the kernel when sent, so no
    /// process can change it afterwards (message::is_volatile() is false).
    buffer alloc_secured(std::size_t n) {
        zcio_buf *b = nullptr;
        detail::check(zcio_buf_alloc_secured(pool_.get(), n, &b), "zcio_buf_alloc_secured");
        return buffer(b);
    }
    pool_stats stats() const {
        pool_stats s{};
        detail::check(zcio_pool_get_stats(pool_.get(), &s), "zcio_pool_get_stats");
        return s;
    }
    /// Whether the pool's chunks use transparent huge pages (zcio_pool_get_huge_pages;
    /// reads /proc/self/smaps: call it to report, not per message).
    huge_pages huge_pages_status() const {
        huge_pages h{};
        detail::check(zcio_pool_get_huge_pages(pool_.get(), &h), "zcio_pool_get_huge_pages");
        return h;
    }
    zcio_pool *native_handle() const noexcept { return pool_.get(); }

  private:
    explicit pool(zcio_pool *p) noexcept : pool_(p) {}
    std::optional<buffer> get(std::size_t n, int ms, const char *op) {
        zcio_buf *b = nullptr;
        int rc = zcio_buf_alloc_timeout(pool_.get(), n, ms, &b);
        if ((rc == -EAGAIN && ms == 0) || (rc == -ETIMEDOUT && ms > 0)) return std::nullopt;
        detail::check(rc, op);
        return buffer(b);
    }
    detail::owned<zcio_pool, detail::free_pool> pool_;
};

namespace detail {
/// copy_into's wait with a C timeout (< 0: the pool's bound); nullopt on -EAGAIN when it may wait less.
inline std::optional<message> copy_into_ms(const pool &p, const message &m, int ms);
} // namespace detail

/// A read-only message: either frozen buffers of this process, on their way
/// out (1..64 slices), or a message received from a peer (zcio_msg), whose
/// bytes are the sender's pages in place. Destroying a received message
/// releases it (the sender gets its buffers back); sending one forwards it
/// by reference.
class message {
  public:
    /// Most slices a message may have.
    static constexpr std::size_t max_slices = 64;

    message(message &&) noexcept = default;
    message &operator=(message &&) noexcept = default;

    /// Append the slices of `tail` (an outgoing message: header + payload ...).
    message &append(message &&tail) {
        if (received_ || tail.received_)
            throw error(-EINVAL, "zcio::message::append", "only messages of this process's buffers can be joined");
        if (bufs_.size() + tail.bufs_.size() > max_slices)
            throw error(-EINVAL, "zcio::message::append", "a message has at most 64 slices");
        for (std::size_t i = 0; i < tail.bufs_.size(); i++) bufs_.push_back(std::move(tail.bufs_[i]));
        tail.bufs_.clear();
        return *this;
    }

    /// Total length in bytes.
    std::size_t size() const noexcept {
        if (received_) return zcio_msg_len(received_.get());
        std::size_t n = 0;
        for (std::size_t i = 0; i < bufs_.size(); i++) n += bufs_[i].len;
        return n;
    }
    std::size_t slice_count() const noexcept {
        if (received_) {
            auto n = zcio_msg_slices(received_.get(), nullptr, 0);
            return n < 0 ? 0 : static_cast<std::size_t>(n);
        }
        return bufs_.size();
    }
    /// Slice `i`, in place (see the volatile rule).
    std::span<const std::byte> slice(std::size_t i) const {
        if (!received_) {
            if (i >= bufs_.size()) throw error(-ERANGE, "zcio::message::slice", "no such slice");
            return {bufs_[i].data, bufs_[i].len};
        }
        zcio_slice s[max_slices];
        auto n = detail::check(zcio_msg_slices(received_.get(), s, max_slices), "zcio_msg_slices");
        if (i >= static_cast<std::size_t>(n)) throw error(-ERANGE, "zcio::message::slice", "no such slice");
        return {static_cast<const std::byte *>(s[i].data), s[i].len};
    }
    /// Every slice, in order.
    std::vector<std::span<const std::byte>> slices() const {
        std::vector<std::span<const std::byte>> v;
        if (!received_) {
            for (std::size_t i = 0; i < bufs_.size(); i++) v.emplace_back(bufs_[i].data, bufs_[i].len);
            return v;
        }
        zcio_slice s[max_slices];
        auto n = detail::check(zcio_msg_slices(received_.get(), s, max_slices), "zcio_msg_slices");
        for (ssize_t i = 0; i < n; i++) v.emplace_back(static_cast<const std::byte *>(s[i].data), s[i].len);
        return v;
    }
    /// The bytes of a one-slice message, in place (throws for several slices: use slices()).
    std::span<const std::byte> bytes() const {
        if (!received_ && bufs_.size() == 1) return {bufs_[0].data, bufs_[0].len};
        if (slice_count() != 1)
            throw error(-EINVAL, "zcio::message::bytes", "the message has several slices: use slices() or read()");
        return slice(0);
    }
    /// Copy up to out.size() bytes from byte `off` into `out` (each byte read
    /// once: the copy is private and cannot change); returns how many.
    std::size_t read(std::size_t off, std::span<std::byte> out) const {
        if (received_)
            return static_cast<std::size_t>(
                detail::check(zcio_msg_read(received_.get(), off, out.data(), out.size()), "zcio_msg_read"));
        std::size_t done = 0;
        for (std::size_t i = 0; i < bufs_.size(); i++) {
            const frozen &b = bufs_[i];
            if (done == out.size()) break;
            if (off >= b.len) {
                off -= b.len;
                continue;
            }
            std::size_t n = std::min(b.len - off, out.size() - done);
            std::memcpy(out.data() + done, b.data + off, n);
            done += n;
            off = 0;
        }
        return done;
    }
    /// A private copy of every byte.
    std::vector<std::byte> to_vector() const {
        std::vector<std::byte> v(size());
        v.resize(read(0, v));
        return v;
    }
    /// Whether the sender can still write the bytes (a pool buffer; false
    /// for secured buffers). Outgoing messages: true (this process can).
    bool is_volatile() const {
        if (!received_) return true;
        return detail::check(zcio_msg_is_volatile(received_.get()), "zcio_msg_is_volatile") != 0;
    }
    /// Whether it came from a peer (recv), or from copy_into, rather than from
    /// this process's frozen buffers: it has a C handle.
    bool is_received() const noexcept { return static_cast<bool>(received_); }
    /// writev(2) straight from the shared pages (received messages).
    std::size_t write_to(int fd) const {
        if (!received_) throw error(-EINVAL, "zcio::message::write_to", "only received messages");
        return static_cast<std::size_t>(detail::check(zcio_msg_write_to(received_.get(), fd), "zcio_msg_write_to"));
    }
    /// Whether every slice is a secured buffer, sealed by the kernel (checked
    /// when it was received; a trusted peer does not make this true). Outgoing
    /// messages: false.
    bool is_secured() const {
        if (!received_) return false;
        return detail::check(zcio_msg_is_secured(received_.get()), "zcio_msg_is_secured") != 0;
    }
    /// Append the slices of `tail` (no byte is copied): zcio_msg_join for
    /// messages with a C handle (received, or made by copy_into; `tail` is
    /// consumed), append() for two outgoing messages. Throws too_large (more
    /// than 64 slices together; both stay as they were) or invalid_input (one
    /// of each kind).
    message &join(message &&tail) {
        if (!received_ && !tail.received_) return append(std::move(tail));
        if (!received_ || !tail.received_)
            throw error(-EINVAL, "zcio::message::join",
                        "a message with a C handle (received, copy_into) joins only another such message");
        detail::check(zcio_msg_join(received_.get(), tail.received_.get()), "zcio_msg_join");
        (void)tail.received_.release(); // the join freed its handle; its slices are this message's
        return *this;
    }
    /// Split at byte `at` (zcio_msg_split): this message keeps [0, at), the
    /// rest is returned (no byte is copied; a slice cut in two is shared).
    /// Throws out_of_range (at > size(); nothing changes). Messages with a C handle.
    message split(std::size_t at) {
        need_handle("zcio::message::split");
        zcio_msg *t = nullptr;
        detail::check(zcio_msg_split(received_.get(), at, &t), "zcio_msg_split");
        return message(t);
    }
    /// Drop `front` bytes from the start and `back` from the end (zcio_msg_clip;
    /// slices cut away entirely are released). Throws out_of_range (front + back
    /// > size(); nothing changes). Messages with a C handle.
    message &clip(std::size_t front, std::size_t back) {
        need_handle("zcio::message::clip");
        detail::check(zcio_msg_clip(received_.get(), front, back), "zcio_msg_clip");
        return *this;
    }
    /// The C handle of a received message (or of a copy_into result;
    /// nullptr otherwise); still owned here.
    const zcio_msg *native_handle() const noexcept { return received_.get(); }

  private:
    friend class buffer;
    friend class channel;
    friend std::optional<message> detail::copy_into_ms(const pool &, const message &, int);
    void need_handle(const char *op) const {
        if (!received_)
            throw error(-EINVAL, op, "only messages with a C handle (received, copy_into); outgoing ones: shape the buffers");
    }
    struct frozen {
        detail::owned<zcio_buf, detail::free_buf> buf;
        const std::byte *data = nullptr;
        std::size_t len = 0;
    };
    /// The frozen buffers; the first one inline (most messages have one
    /// slice: no allocation per message).
    class frozen_list {
      public:
        frozen_list() = default;
        frozen_list(frozen_list &&o) noexcept
            : first_(std::move(o.first_)), rest_(std::move(o.rest_)), n_(std::exchange(o.n_, 0)) {}
        frozen_list &operator=(frozen_list &&o) noexcept {
            first_ = std::move(o.first_);
            rest_ = std::move(o.rest_);
            n_ = std::exchange(o.n_, 0);
            return *this;
        }
        std::size_t size() const noexcept { return n_; }
        frozen &operator[](std::size_t i) noexcept { return i == 0 ? first_ : rest_[i - 1]; }
        const frozen &operator[](std::size_t i) const noexcept { return i == 0 ? first_ : rest_[i - 1]; }
        void push_back(frozen &&f) {
            if (n_ == 0) first_ = std::move(f);
            else rest_.push_back(std::move(f));
            n_++;
        }
        void clear() noexcept {
            first_ = frozen{};
            rest_.clear();
            n_ = 0;
        }

      private:
        frozen first_;
        std::vector<frozen> rest_;
        std::size_t n_ = 0;
    };
    message() = default;
    explicit message(zcio_msg *m) noexcept : received_(m) {}
    frozen_list bufs_;
    detail::owned<zcio_msg, detail::free_msg> received_;
};

inline message buffer::freeze() && {
    message m;
    std::size_t n = size();
    m.bufs_.push_back(message::frozen{std::move(buf_), data_, n});
    data_ = nullptr;
    return m;
}

inline std::optional<message> detail::copy_into_ms(const pool &p, const message &m, int ms) {
    m.need_handle("zcio::copy_into");
    zcio_msg *out = nullptr;
    int rc = zcio_msg_copy_into(p.native_handle(), m.received_.get(), ms, &out);
    if (rc == -EAGAIN && ms >= 0) return std::nullopt;
    check(rc, "zcio_msg_copy_into");
    return message(out);
}
/// Copy the bytes of `m` (received, or with a C handle) into one fresh buffer
/// of `p` (zcio_msg_copy_into: what forward() does per message in copy mode):
/// a one-slice message that only this process made; send it, or join it. `m`
/// stays yours. Waits up to the pool's alloc_timeout; throws would_block when
/// no buffer came in time, the message is larger than the pool allows, or empty.
inline message copy_into(const pool &p, const message &m) { return *detail::copy_into_ms(p, m, -1); }
/// The same without waiting: nullopt when no buffer is free now (or too large, or empty).
inline std::optional<message> try_copy_into(const pool &p, const message &m) { return detail::copy_into_ms(p, m, 0); }
/// The same waiting at most `d`: nullopt when it passed (or too large, or empty).
template <class Rep, class Period>
std::optional<message> copy_into_for(const pool &p, const message &m, std::chrono::duration<Rep, Period> d) {
    return detail::copy_into_ms(p, m, detail::timeout_ms(d));
}

/// A send that failed: the message comes back (take_message), as in Rust's
/// SendError<T>::into_inner.
class send_error : public error {
  public:
    send_error(int code, const char *op, std::string detail, message &&m)
        : error(code, op, std::move(detail)), msg_(std::make_shared<message>(std::move(m))) {}
    /// The message that was not sent (once; empty afterwards).
    std::optional<message> take_message() {
        if (!msg_) return std::nullopt;
        std::optional<message> m(std::move(*msg_));
        msg_.reset();
        return m;
    }

  private:
    std::shared_ptr<message> msg_; // exceptions are copyable; the message is not
};

// ---------------------------------------------------------------- channels

/// What a send does when it finds the receiver asleep (zcio_channel_config.notify;
/// Rust's Notify): wake it now, or defer the wake (wake_batch, max_age, flush()).
enum class notify_mode : int { now = ZCIO_NOTIFY_NOW, defer = ZCIO_NOTIFY_DEFER };
/// What a send into a full ring (or at the in-flight caps) does
/// (zcio_channel_config.full; Rust's FullPolicy): wait up to its bound, or fail at once.
enum class full_policy : int { block = ZCIO_FULL_BLOCK, fail = ZCIO_FULL_FAIL };
/// What a hold past hold_limit does (zcio_channel_config.hold_expiry; Rust's
/// HoldExpiry): abort the channel, or take the buffer back into its pool.
enum class hold_expiry_action : int { abort = ZCIO_HOLD_ABORT, reclaim = ZCIO_HOLD_RECLAIM };

/// The configuration of a channel end (struct zcio_channel_config: Rust's
/// ChannelConfig with its ChannelPolicy), every field; the defaults are C's
/// (zcio_channel_config_init). An aggregate, for designated initializers:
/// `zcio::channel_config{.max_in_flight = 4, .full = zcio::full_policy::fail}`.
/// A value out of range makes the call that takes it throw invalid_input
/// (detail() says what is allowed).
struct channel_config {
    /// The bounds of the default waits (> 0, or zcio::forever: only for peers you trust).
    std::chrono::milliseconds send_timeout{10'000};
    std::chrono::milliseconds recv_timeout{3'600'000};
    std::chrono::milliseconds connect_timeout{5'000};
    std::chrono::milliseconds accept_timeout{3'600'000};
    /// Descriptor entries per message ring, one per slice in flight (a power of two, 8..=1048576).
    std::uint32_t ring_entries = 1024;
    /// Entries per deallocation-notice ring (a power of two, 8..=1048576).
    std::uint32_t notice_entries = 2048;
    /// Most slices the peer may hold from this end at once (a send beyond waits, or fails).
    std::uint64_t max_in_flight = 65536;
    /// Most bytes of slices the peer may hold from this end at once.
    std::uint64_t max_bytes_in_flight = std::uint64_t{256} << 20;
    /// Pre-fault received regions when mapping them.
    bool populate = true;
    /// How often a sleeping side checks whether the peer is still alive (> 0).
    std::chrono::milliseconds liveness_interval{50};
    /// Largest region a peer may pass this end, in bytes.
    std::uint64_t max_region_len = std::uint64_t{4} << 30;
    /// Small-message slots (0..=65536; 0 turns them off) of lane_slot_size bytes each.
    std::uint32_t lane_slots = 64;
    std::uint64_t lane_slot_size = 4096;
    notify_mode notify = notify_mode::now;
    /// Under notify_mode::defer: wake the sleeping receiver once this many messages wait (>= 1).
    std::uint32_t wake_batch = 1;
    /// Most a deferred message waits before the receiver is woken, and the
    /// longest a receiver sleeps (set it on both ends; > 0).
    std::chrono::microseconds max_age{1000};
    /// Most a wait spins before it sleeps (0: sleep at once); nullopt: the
    /// process's spin policy (zcio::spin_policy) when the config is used.
    std::optional<std::chrono::microseconds> spin{};
    full_policy full = full_policy::block;
    /// Longest the peer may hold a buffer this end lent it (0 or zcio::forever: no limit).
    std::chrono::milliseconds hold_limit{0};
    hold_expiry_action hold_expiry = hold_expiry_action::abort;
    /// Wakes in a row that find the peer's sleep flag set but nobody asleep
    /// before the flag is distrusted (fault_kind::futile_wakes; >= 1).
    std::uint32_t futile_wake_limit = 64;

    bool operator==(const channel_config &) const = default;

    /// The C struct: zcio_channel_config_init (its size and defaults), then field by field.
    zcio_channel_config to_c() const noexcept {
        zcio_channel_config c;
        zcio_channel_config_init(&c);
        c.send_timeout_ms = detail::bound_ms(send_timeout);
        c.recv_timeout_ms = detail::bound_ms(recv_timeout);
        c.connect_timeout_ms = detail::bound_ms(connect_timeout);
        c.accept_timeout_ms = detail::bound_ms(accept_timeout);
        c.ring_entries = ring_entries;
        c.notice_entries = notice_entries;
        c.max_in_flight = max_in_flight;
        c.max_bytes_in_flight = max_bytes_in_flight;
        c.populate = populate ? 1 : 0;
        c.liveness_interval_ms = detail::timeout_ms(liveness_interval); // 0: refused by the library
        c.max_region_len = max_region_len;
        c.lane_slots = lane_slots;
        c.lane_slot_size = lane_slot_size;
        c.notify = static_cast<int>(notify);
        c.wake_batch = wake_batch;
        c.max_age_us = detail::micros(max_age); // 0: refused by the library
        if (spin) c.spin_us = detail::micros(*spin);
        c.full = static_cast<int>(full);
        c.hold_limit_ms = detail::timeout_ms(hold_limit);
        c.hold_expiry = static_cast<int>(hold_expiry);
        c.futile_wake_limit = futile_wake_limit;
        return c;
    }
    /// From the C struct (as zcio_channel_get_config fills it).
    static channel_config from_c(const zcio_channel_config &c) noexcept {
        using ms = std::chrono::milliseconds;
        using us = std::chrono::microseconds;
        auto micros = [](std::uint64_t v) {
            constexpr auto top = static_cast<std::uint64_t>(std::numeric_limits<us::rep>::max());
            return us(static_cast<us::rep>(v > top ? top : v));
        };
        channel_config r;
        r.send_timeout = ms(c.send_timeout_ms);
        r.recv_timeout = ms(c.recv_timeout_ms);
        r.connect_timeout = ms(c.connect_timeout_ms);
        r.accept_timeout = ms(c.accept_timeout_ms);
        r.ring_entries = c.ring_entries;
        r.notice_entries = c.notice_entries;
        r.max_in_flight = c.max_in_flight;
        r.max_bytes_in_flight = c.max_bytes_in_flight;
        r.populate = c.populate != 0;
        r.liveness_interval = ms(c.liveness_interval_ms);
        r.max_region_len = c.max_region_len;
        r.lane_slots = c.lane_slots;
        r.lane_slot_size = c.lane_slot_size;
        r.notify = static_cast<notify_mode>(c.notify);
        r.wake_batch = c.wake_batch;
        r.max_age = micros(c.max_age_us);
        r.spin = micros(c.spin_us);
        r.full = static_cast<full_policy>(c.full);
        r.hold_limit = ms(c.hold_limit_ms);
        r.hold_expiry = static_cast<hold_expiry_action>(c.hold_expiry);
        r.futile_wake_limit = c.futile_wake_limit;
        return r;
    }
};

/// Who may connect to a listener (struct zcio_access; Rust's AccessPolicy):
/// processes whose effective uid is in `uids` or effective gid in `gids`, by
/// the kernel's credentials (SO_PEERCRED), checked before anything they send
/// is read. Both empty: this process's own effective uid only. (No pid list:
/// a pid is reused, and Rust's and C's policies have none.)
struct access_policy {
    std::vector<std::uint32_t> uids{};
    std::vector<std::uint32_t> gids{};
};
/// The name the rendezvous listener's access argument had first.
using access_list = access_policy;

/// The kernel's credentials of the peer (SO_PEERCRED): pid, uid, gid.
using peer_cred = zcio_peer_cred;

/// A kind of misbehaviour of the peer (ZCIO_FAULT_*; Rust's PeerFault).
enum class fault_kind : int {
    other = ZCIO_FAULT_OTHER,                     // a kind this library version does not name
    futile_wakes = ZCIO_FAULT_FUTILE_WAKES,       // value: futile wakes in a row
    not_consuming = ZCIO_FAULT_NOT_CONSUMING,     // a send waited its whole bound for ring space
    not_releasing = ZCIO_FAULT_NOT_RELEASING,     // value: the slices it held at the in-flight caps
    hold_expired = ZCIO_FAULT_HOLD_EXPIRED,       // value: the hold limit in ms (channel aborted)
    holds_reclaimed = ZCIO_FAULT_HOLDS_RECLAIMED, // value: buffers taken back so far
    corrupt = ZCIO_FAULT_CORRUPT,                 // value: 1 a message ring, 2 a notice ring
    malformed = ZCIO_FAULT_MALFORMED,             // value: malformed inputs rejected so far
};

/// The kind's name, as Rust's PeerFault variant ("FutileWakes", ...).
constexpr const char *to_string(fault_kind k) noexcept {
    switch (k) {
    case fault_kind::futile_wakes: return "FutileWakes";
    case fault_kind::not_consuming: return "NotConsuming";
    case fault_kind::not_releasing: return "NotReleasing";
    case fault_kind::hold_expired: return "HoldExpired";
    case fault_kind::holds_reclaimed: return "HoldsReclaimed";
    case fault_kind::corrupt: return "Corrupt";
    case fault_kind::malformed: return "Malformed";
    default: return "Other";
    }
}

/// One misbehaviour of the peer a channel end detected (struct zcio_peer_fault):
/// its kind and its detail (`value`, the latest; see fault_kind). `message` is
/// the library's text, given by channel::health() (empty from faults()).
struct peer_fault {
    fault_kind kind = fault_kind::other;
    std::uint64_t value = 0;
    std::string message;
};

using channel_stats = zcio_channel_stats;
using lane_stats = zcio_lane_stats;

class lane_sender;
class lane_receiver;

namespace detail {
/// The C result of a wait with `ms` as an optional: nullopt for the
/// "nothing now" (ms 0: -EAGAIN) or "not in time" (ms > 0: -ETIMEDOUT) outcome.
inline bool quiet(long rc, int ms) noexcept {
    return (rc == -EAGAIN && ms == 0) || (rc == -ETIMEDOUT && ms != 0 && ms != ZCIO_TIMEOUT_DEFAULT);
}
} // namespace detail

/// One end of a channel (zcio_channel): messages by reference, both ways.
class channel {
  public:
    /// Connect to the listener at `path` (the handshake waits up to config.connect_timeout).
    static channel connect(const std::string &path, const channel_config &config = {}) {
        zcio_channel_config c = config.to_c();
        zcio_channel *ch = nullptr;
        detail::check(zcio_connect_with(path.c_str(), &c, &ch), "zcio_connect_with");
        return channel(ch);
    }
    /// Two connected ends in this process, both with `config` (zcio_channel_pair;
    /// Rust's Channel::pair): for threads and tests.
    static std::pair<channel, channel> pair(const channel_config &config = {}) {
        zcio_channel_config c = config.to_c();
        zcio_channel *a = nullptr, *b = nullptr;
        detail::check(zcio_channel_pair(&c, &a, &b), "zcio_channel_pair");
        return {channel(a), channel(b)};
    }
    channel(channel &&) noexcept = default;
    channel &operator=(channel &&) noexcept = default;

    /// Send by reference, waiting up to the send bound for room; throws
    /// send_error (with the message inside) on failure.
    void send(message &&m) { (void)put(m, ZCIO_TIMEOUT_DEFAULT); }
    /// Send now, or give the message back (would block: the ring is full or
    /// the peer holds too many buffers). nullopt: sent.
    [[nodiscard]] std::optional<message> try_send(message &&m) {
        if (put(m, 0)) return std::nullopt;
        return std::optional<message>(std::move(m));
    }
    /// Send within `d`, or give the message back when `d` passed (or the
    /// send would block: full_policy::fail, the in-flight caps). nullopt: sent.
    template <class Rep, class Period>
    [[nodiscard]] std::optional<message> send_for(message &&m, std::chrono::duration<Rep, Period> d) {
        if (put(m, detail::timeout_ms(d))) return std::nullopt;
        return std::optional<message>(std::move(m));
    }
    /// Copy `bytes` into a buffer of the channel's own pool and send it
    /// (small or occasional messages).
    void send_copy(std::span<const std::byte> bytes) {
        detail::check(zcio_send_bytes(ch_.get(), bytes.data(), bytes.size(), ZCIO_TIMEOUT_DEFAULT), "zcio_send_bytes");
    }
    /// send_copy without waiting: false if it would block.
    [[nodiscard]] bool try_send_copy(std::span<const std::byte> bytes) {
        int rc = zcio_send_bytes(ch_.get(), bytes.data(), bytes.size(), 0);
        if (rc == -EAGAIN) return false;
        detail::check(rc, "zcio_send_bytes");
        return true;
    }

    /// The next message, waiting up to the receive bound (timed_out after it;
    /// disconnected once the peer is gone and everything it sent was received).
    message recv() { return *get(ZCIO_TIMEOUT_DEFAULT); }
    /// A message if one is there now.
    std::optional<message> try_recv() { return get(0); }
    /// A message within `d`, or nullopt.
    template <class Rep, class Period> std::optional<message> recv_for(std::chrono::duration<Rep, Period> d) {
        return get(detail::timeout_ms(d));
    }

    /// Open a lane (small messages in slots only this process writes).
    lane_sender open_lane(std::uint32_t slots = 64, std::size_t slot_size = 4096);
    /// Take the lane the peer opened, waiting up to the receive bound.
    lane_receiver accept_lane();
    std::optional<lane_receiver> try_accept_lane();
    template <class Rep, class Period>
    std::optional<lane_receiver> accept_lane_for(std::chrono::duration<Rep, Period> d);

    /// Process the peer's deallocation notices now; returns the slices that came back.
    int reclaim() { return detail::check(zcio_channel_reclaim(ch_.get()), "zcio_channel_reclaim"); }
    channel_stats stats() const {
        channel_stats s{};
        detail::check(zcio_channel_get_stats(ch_.get(), &s), "zcio_channel_get_stats");
        return s;
    }
    /// The configuration of this end (zcio_channel_get_config; an accepted
    /// channel has its listener's), spin resolved to the value in effect.
    channel_config config() const {
        zcio_channel_config c;
        zcio_channel_config_init(&c);
        detail::check(zcio_channel_get_config(ch_.get(), &c), "zcio_channel_get_config");
        return channel_config::from_c(c);
    }
    /// Wake the peer for deferred messages (notify_mode::defer), publish the
    /// batched deallocation notices and enforce the hold limit (zcio_channel_flush).
    void flush() { detail::check(zcio_channel_flush(ch_.get()), "zcio_channel_flush"); }
    /// Enforce hold_limit now (zcio_channel_expire_holds; also done by every
    /// send, reclaim and flush): the lent slices taken back
    /// (hold_expiry_action::reclaim); throws aborted once the channel was aborted.
    std::size_t expire_holds() {
        return static_cast<std::size_t>(detail::check(zcio_channel_expire_holds(ch_.get()), "zcio_channel_expire_holds"));
    }
    /// The first misbehaviour of the peer this end detected, with its text;
    /// nullopt while there is none (zcio_channel_health).
    std::optional<peer_fault> health() const {
        zcio_peer_fault f{};
        if (detail::check(zcio_channel_health(ch_.get(), &f), "zcio_channel_health") == 0) return std::nullopt;
        return peer_fault{static_cast<fault_kind>(f.kind), f.value, zcio_last_error()};
    }
    /// Every kind of misbehaviour detected so far, in the order first seen
    /// (latest detail per kind), then the running totals of malformed input
    /// and reclaimed holds (zcio_channel_faults).
    std::vector<peer_fault> faults() const {
        std::vector<zcio_peer_fault> raw(8);
        for (;;) {
            int n = detail::check(zcio_channel_faults(ch_.get(), raw.data(), raw.size()), "zcio_channel_faults");
            if (static_cast<std::size_t>(n) <= raw.size()) {
                std::vector<peer_fault> out;
                out.reserve(static_cast<std::size_t>(n));
                for (int i = 0; i < n; i++) out.push_back({static_cast<fault_kind>(raw[i].kind), raw[i].value, {}});
                return out;
            }
            raw.resize(static_cast<std::size_t>(n));
        }
    }
    /// The kernel's credentials of the peer process (zcio_channel_peer; taken at set-up).
    peer_cred peer() const {
        peer_cred c{};
        detail::check(zcio_channel_peer(ch_.get(), &c), "zcio_channel_peer");
        return c;
    }
    /// true when the peer is known to be gone (a flag, no system call).
    bool is_disconnected() const {
        return detail::check(zcio_channel_is_disconnected(ch_.get()), "zcio_channel_is_disconnected") == 1;
    }
    /// Probe whether the peer is alive (its socket and pidfd); if it is gone,
    /// release everything it held. true: alive.
    bool check_peer() { return detail::check(zcio_channel_check_peer(ch_.get()), "zcio_channel_check_peer") == 1; }
    /// The set-up socket (readable when control records or a hang-up are
    /// pending), to poll for the peer going away; it belongs to the channel.
    int socket() const { return detail::check(zcio_channel_socket(ch_.get()), "zcio_channel_socket"); }
    /// Announce every current chunk of `p` to the peer now (zcio_channel_share_pool).
    void share_pool(const pool &p) {
        detail::check(zcio_channel_share_pool(ch_.get(), p.native_handle()), "zcio_channel_share_pool");
    }
    /// Declare that the peer never writes a buffer after sending it: messages
    /// received from now on are not volatile and may be read in place
    /// (zcio_channel_trust_peer; Rust's unsafe Channel::trust_peer). Only for
    /// peers (and every originator upstream) you trust to leave sent buffers alone.
    void trust_peer() { detail::check(zcio_channel_trust_peer(ch_.get()), "zcio_channel_trust_peer"); }
    bool is_peer_trusted() const {
        return detail::check(zcio_channel_is_peer_trusted(ch_.get()), "zcio_channel_is_peer_trusted") == 1;
    }
    /// Event loops: the doorbell (zcio_channel_doorbell; switches this end to
    /// bell mode for good). Loop: try_recv(); prepare_recv_sleep(); poll fd();
    /// doorbell_rang(). The fd belongs to the channel.
    int fd() const { return detail::check(zcio_channel_doorbell(ch_.get()), "zcio_channel_doorbell"); }
    /// true: sleep on fd(); false: a message is pending.
    bool prepare_recv_sleep() {
        return detail::check(zcio_channel_prepare_recv_sleep(ch_.get()), "zcio_channel_prepare_recv_sleep") == 1;
    }
    /// true: sleep on fd(); false: send again now (for a send that would block).
    bool prepare_send_sleep(std::size_t slices, std::uint64_t bytes) {
        return detail::check(zcio_channel_prepare_send_sleep(ch_.get(), slices, bytes),
                             "zcio_channel_prepare_send_sleep") == 1;
    }
    /// After fd() polled readable; true when it has hung up (look again on a
    /// timer from then on, not on the fd).
    bool doorbell_rang() {
        return detail::check(zcio_channel_doorbell_rang(ch_.get()), "zcio_channel_doorbell_rang") == 1;
    }
    zcio_channel *native_handle() const noexcept { return ch_.get(); }

  private:
    friend class listener;
    friend class semantic_endpoint;
    friend class association;
    explicit channel(zcio_channel *c) noexcept : ch_(c) {}
    /// true: sent (m is emptied); false: a quiet failure (m is intact).
    bool put(message &m, int ms) {
        int rc;
        if (m.received_) {
            rc = zcio_forward(ch_.get(), m.received_.get(), ms);
            if (rc == 0) {
                m.received_.reset();
                return true;
            }
        } else if (m.bufs_.size() == 1) {
            rc = zcio_send(ch_.get(), m.bufs_[0].buf.get(), ms);
            if (rc == 0) {
                (void)m.bufs_[0].buf.release(); // the channel's now
                m.bufs_.clear();
                return true;
            }
        } else {
            zcio_buf *ptrs[message::max_slices] = {};
            std::size_t n = m.bufs_.size();
            for (std::size_t i = 0; i < n && i < message::max_slices; i++) ptrs[i] = m.bufs_[i].buf.get();
            rc = zcio_sendv(ch_.get(), ptrs, n, ms);
            if (rc == 0) {
                for (std::size_t i = 0; i < n; i++) (void)m.bufs_[i].buf.release();
                m.bufs_.clear();
                return true;
            }
        }
        // A bounded send also ends with -EAGAIN when the peer still holds the
        // in-flight caps at its deadline (or under full_policy::fail): not sent either.
        if (detail::quiet(rc, ms) || (rc == -EAGAIN && ms != ZCIO_TIMEOUT_DEFAULT)) return false;
        throw send_error(rc, "zcio_send", zcio_last_error(), std::move(m));
    }
    std::optional<message> get(int ms) {
        zcio_msg *m = nullptr;
        int rc = zcio_recv(ch_.get(), ms, &m);
        if (rc == 0) return message(m);
        if (detail::quiet(rc, ms)) return std::nullopt;
        detail::raise(rc, "zcio_recv");
    }
    detail::owned<zcio_channel, detail::free_channel> ch_;
};

// ------------------------------------------------------------- forwarding

/// Why forward() stopped (zcio_forward_report.end; Rust's ForwardEnd).
enum class forward_end : int {
    upstream_disconnected = ZCIO_FORWARD_UPSTREAM_DISCONNECTED,     // all it sent was forwarded; `to` closed
    downstream_disconnected = ZCIO_FORWARD_DOWNSTREAM_DISCONNECTED, // `from` was closed in turn
    idle = ZCIO_FORWARD_IDLE,                                       // no message for max_idle
    failed = ZCIO_FORWARD_FAILED,                                   // see forward_report::error
};

/// The tuning of forward() (struct zcio_forward_config: Rust's ForwardConfig);
/// the defaults are C's (zcio_forward_config_init). An aggregate:
/// `zcio::forward(up, down, {.max_idle = 500ms})`.
struct forward_config {
    /// Messages taken without waiting before deferred wakes and notices are flushed (>= 1).
    std::uint32_t batch = 64;
    /// Longest single wait for the next message; after it the loop reclaims,
    /// flushes and checks the downstream peer (> 0, finite).
    std::chrono::milliseconds idle_wait{20};
    /// Stop (forward_end::idle) after this long without a message (0: only when a channel ends).
    std::chrono::milliseconds max_idle{0};
    /// Bound on the wait for a buffer of the copy pool (copy mode).
    std::chrono::milliseconds alloc_timeout{10'000};
    /// How often a busy loop checks that the downstream peer is alive (> 0, finite).
    std::chrono::milliseconds liveness_interval{50};

    bool operator==(const forward_config &) const = default;

    /// The C struct: zcio_forward_config_init (its size and defaults), then field by field.
    zcio_forward_config to_c() const noexcept {
        zcio_forward_config c;
        zcio_forward_config_init(&c);
        c.batch = batch;
        c.idle_wait_ms = detail::timeout_ms(idle_wait); // 0: refused by the library
        c.max_idle_ms = detail::timeout_ms(max_idle);
        c.alloc_timeout_ms = detail::bound_ms(alloc_timeout);
        c.liveness_interval_ms = detail::timeout_ms(liveness_interval);
        return c;
    }
};

/// What forward() did and why it stopped (zcio_forward_report; Rust's ForwardReport).
struct forward_report {
    forward_end end{};
    /// With forward_end::failed: the failure's negative C code (else 0).
    int error = 0;
    /// Messages and payload bytes forwarded.
    std::uint64_t msgs = 0;
    std::uint64_t bytes = 0;
    /// Messages dropped (malformed input, no copy buffer in time, a send that
    /// failed but left the downstream alive).
    std::uint64_t errors = 0;
    /// Rounds of draining what was ready.
    std::uint64_t batches = 0;
};

namespace detail {
inline forward_report forward_run(channel &from, channel &to, const pool *p, const forward_config &cfg) {
    zcio_forward_config c = cfg.to_c();
    zcio_forward_report r{};
    int rc = zcio_forward_run(from.native_handle(), to.native_handle(), p ? p->native_handle() : nullptr, &c, &r,
                              sizeof r);
    // -EPIPE and a failure mid-stream are in the report; what throws is what
    // stopped it before it ran (invalid_input: a bad field, the same channel twice).
    if (rc < 0 && rc != -EPIPE && r.end != ZCIO_FORWARD_FAILED) raise(rc, "zcio_forward_run");
    return forward_report{static_cast<forward_end>(r.end), r.error, r.msgs, r.bytes, r.errors, r.batches};
}
} // namespace detail

/// Forward every message arriving on `from` to `to` by reference (no byte is
/// copied; the deallocation notices travel back hop by hop) until one of them
/// ends, max_idle passes or a failure (zcio_forward_run; Rust's
/// zcio::forward::run). A peer killed mid-stream ends it the same way, never
/// as a hang; the report says which. Destroy both channels soon after.
inline forward_report forward(channel &from, channel &to, const forward_config &cfg = {}) {
    return detail::forward_run(from, to, nullptr, cfg);
}
/// The same, copying each message into a buffer of `copy_pool` and sending the copy.
inline forward_report forward(channel &from, channel &to, const pool &copy_pool, const forward_config &cfg = {}) {
    return detail::forward_run(from, to, &copy_pool, cfg);
}

/// Listens for channels on a Unix socket (zcio_listener); the socket file is
/// removed when it is destroyed.
class listener {
  public:
    /// Listen on `path` (a stale socket of a dead listener is replaced); the
    /// channels it accepts get `config`; `access` says who may connect (empty:
    /// this process's effective uid only). A refused process's connect throws
    /// permission_denied, and so does this listener's accept (it stays usable).
    static listener bind(const std::string &path, const channel_config &config = {},
                         const access_policy &access = {}) {
        zcio_channel_config c = config.to_c();
        zcio_access a{access.uids.data(), access.uids.size(), access.gids.data(), access.gids.size()};
        bool own = access.uids.empty() && access.gids.empty();
        zcio_listener *l = nullptr;
        detail::check(zcio_listen_access(path.c_str(), &c, own ? nullptr : &a, &l), "zcio_listen_access");
        return listener(l, path);
    }
    listener(listener &&) noexcept = default;
    listener &operator=(listener &&) noexcept = default;

    /// One channel, waiting up to the accept bound.
    channel accept() { return *get(ZCIO_TIMEOUT_DEFAULT); }
    std::optional<channel> try_accept() { return get(0); }
    template <class Rep, class Period> std::optional<channel> accept_for(std::chrono::duration<Rep, Period> d) {
        return get(detail::timeout_ms(d));
    }
    const std::string &path() const noexcept { return path_; }
    zcio_listener *native_handle() const noexcept { return l_.get(); }

  private:
    listener(zcio_listener *l, std::string path) noexcept : l_(l), path_(std::move(path)) {}
    std::optional<channel> get(int ms) {
        zcio_channel *c = nullptr;
        int rc = zcio_accept(l_.get(), ms, &c);
        if (rc == 0) return channel(c);
        if (detail::quiet(rc, ms)) return std::nullopt;
        detail::raise(rc, "zcio_accept");
    }
    detail::owned<zcio_listener, detail::free_listener> l_;
    std::string path_;
};

// ------------------------------------------------------------------- lanes

/// A slot lent by a lane sender, to fill: send(n) sends its first n bytes;
/// destroying it unsent gives the slot back. One loan per sender at a time.
class lane_loan {
  public:
    lane_loan(lane_loan &&o) noexcept : tx_(std::exchange(o.tx_, nullptr)), data_(o.data_) {}
    lane_loan &operator=(lane_loan &&o) noexcept {
        if (this != &o) {
            cancel();
            tx_ = std::exchange(o.tx_, nullptr);
            data_ = o.data_;
        }
        return *this;
    }
    ~lane_loan() { cancel(); }
    /// The slot (it holds what it carried last).
    std::span<std::byte> data() noexcept { return data_; }
    /// Send the first `n` bytes; the slot is the receiver's until it releases it.
    void send(std::size_t n) && {
        zcio_lane_sender *tx = std::exchange(tx_, nullptr);
        int rc = zcio_lane_send(tx, n);
        if (rc == -EMSGSIZE) tx_ = tx; // the loan stays out
        detail::check(rc, "zcio_lane_send");
    }

  private:
    friend class lane_sender;
    lane_loan(zcio_lane_sender *tx, std::span<std::byte> d) noexcept : tx_(tx), data_(d) {}
    void cancel() noexcept {
        if (tx_) (void)zcio_lane_cancel(std::exchange(tx_, nullptr));
    }
    zcio_lane_sender *tx_;
    std::span<std::byte> data_;
};

/// The sending end of a lane (zcio_lane_sender); destroy it before its channel.
class lane_sender {
  public:
    lane_sender(lane_sender &&) noexcept = default;
    lane_sender &operator=(lane_sender &&) noexcept = default;

    /// A free slot, waiting up to the channel's send bound.
    lane_loan loan() { return *get(ZCIO_TIMEOUT_DEFAULT); }
    std::optional<lane_loan> try_loan() { return get(0); }
    template <class Rep, class Period> std::optional<lane_loan> loan_for(std::chrono::duration<Rep, Period> d) {
        return get(detail::timeout_ms(d));
    }
    /// A loan, a copy, a send.
    void send_copy(std::span<const std::byte> bytes) {
        detail::check(zcio_lane_send_bytes(tx_.get(), bytes.data(), bytes.size(), ZCIO_TIMEOUT_DEFAULT),
                      "zcio_lane_send_bytes");
    }
    std::size_t slot_size() const noexcept { return zcio_lane_slot_size(tx_.get()); }
    lane_stats stats() const {
        lane_stats s{};
        detail::check(zcio_lane_sender_get_stats(tx_.get(), &s), "zcio_lane_sender_get_stats");
        return s;
    }

  private:
    friend class channel;
    explicit lane_sender(zcio_lane_sender *t) noexcept : tx_(t) {}
    std::optional<lane_loan> get(int ms) {
        void *data = nullptr;
        std::size_t cap = 0;
        int rc = zcio_lane_loan(tx_.get(), ms, &data, &cap);
        if (rc == 0) return lane_loan(tx_.get(), {static_cast<std::byte *>(data), cap});
        if (detail::quiet(rc, ms)) return std::nullopt;
        detail::raise(rc, "zcio_lane_loan");
    }
    detail::owned<zcio_lane_sender, detail::free_lane_tx> tx_;
};

/// A message received on a lane, in place; destroying it releases the slot.
/// One at a time per receiver (receiving again while one lives throws busy).
class lane_msg {
  public:
    lane_msg(lane_msg &&o) noexcept : rx_(std::exchange(o.rx_, nullptr)), held_(o.held_), data_(o.data_) {}
    lane_msg &operator=(lane_msg &&o) noexcept {
        if (this != &o) {
            release();
            rx_ = std::exchange(o.rx_, nullptr);
            held_ = o.held_;
            data_ = o.data_;
        }
        return *this;
    }
    ~lane_msg() { release(); }
    /// The bytes, in place (the sender keeps its writable mapping: copy out what you validate).
    std::span<const std::byte> bytes() const noexcept { return data_; }
    std::size_t size() const noexcept { return data_.size(); }

  private:
    friend class lane_receiver;
    lane_msg(zcio_lane_receiver *rx, bool *held, std::span<const std::byte> d) noexcept
        : rx_(rx), held_(held), data_(d) {}
    void release() noexcept {
        if (rx_) {
            (void)zcio_lane_release(std::exchange(rx_, nullptr));
            *held_ = false;
        }
    }
    zcio_lane_receiver *rx_;
    bool *held_;
    std::span<const std::byte> data_;
};

/// The receiving end of a lane (zcio_lane_receiver); destroy it before its channel.
class lane_receiver {
  public:
    lane_receiver(lane_receiver &&) noexcept = default;
    lane_receiver &operator=(lane_receiver &&) noexcept = default;

    /// The next message, waiting up to the channel's receive bound.
    lane_msg recv() { return *get(ZCIO_TIMEOUT_DEFAULT); }
    std::optional<lane_msg> try_recv() { return get(0); }
    template <class Rep, class Period> std::optional<lane_msg> recv_for(std::chrono::duration<Rep, Period> d) {
        return get(detail::timeout_ms(d));
    }
    lane_stats stats() const {
        lane_stats s{};
        detail::check(zcio_lane_receiver_get_stats(rx_.get(), &s), "zcio_lane_receiver_get_stats");
        return s;
    }

  private:
    friend class channel;
    explicit lane_receiver(zcio_lane_receiver *r) : rx_(r), held_(std::make_unique<bool>(false)) {}
    std::optional<lane_msg> get(int ms) {
        if (*held_)
            throw error(-EBUSY, "zcio::lane_receiver::recv", "a lane_msg of this receiver is still alive: destroy it first");
        const void *data = nullptr;
        std::size_t len = 0;
        int rc = zcio_lane_recv(rx_.get(), ms, &data, &len);
        if (rc == 0) {
            *held_ = true;
            return lane_msg(rx_.get(), held_.get(), {static_cast<const std::byte *>(data), len});
        }
        if (detail::quiet(rc, ms)) return std::nullopt;
        detail::raise(rc, "zcio_lane_recv");
    }
    detail::owned<zcio_lane_receiver, detail::free_lane_rx> rx_;
    std::unique_ptr<bool> held_; // stable across moves of the receiver
};

inline lane_sender channel::open_lane(std::uint32_t slots, std::size_t slot_size) {
    zcio_lane_sender *t = nullptr;
    detail::check(zcio_lane_open(ch_.get(), slots, slot_size, &t), "zcio_lane_open");
    return lane_sender(t);
}
namespace detail {
inline std::optional<lane_receiver> accept_lane(zcio_channel *ch, int ms,
                                                lane_receiver (*make)(zcio_lane_receiver *)) {
    zcio_lane_receiver *r = nullptr;
    int rc = zcio_lane_accept(ch, ms, &r);
    if (rc == 0) return make(r);
    if (quiet(rc, ms)) return std::nullopt;
    raise(rc, "zcio_lane_accept");
}
} // namespace detail
inline lane_receiver channel::accept_lane() {
    return *detail::accept_lane(ch_.get(), ZCIO_TIMEOUT_DEFAULT, [](zcio_lane_receiver *r) { return lane_receiver(r); });
}
inline std::optional<lane_receiver> channel::try_accept_lane() {
    return detail::accept_lane(ch_.get(), 0, [](zcio_lane_receiver *r) { return lane_receiver(r); });
}
template <class Rep, class Period>
std::optional<lane_receiver> channel::accept_lane_for(std::chrono::duration<Rep, Period> d) {
    return detail::accept_lane(ch_.get(), detail::timeout_ms(d),
                               [](zcio_lane_receiver *r) { return lane_receiver(r); });
}

// ------------------------------------------------------------------- rings

/// A ring's layout (Rust's Layout; ZCIO_LAYOUT_*): a byte stream
/// (Continuous), variable-size blocks with in-band headers (Variable, what
/// ZCIO_O_BLOCKS makes), fixed-size slots (Slotted), variable-size blocks
/// with their headers in a descriptor ring (Descriptors), or rich pointers
/// into other rings (Index: written only by ring_producer::splice).
enum class ring_layout {
    stream = ZCIO_LAYOUT_CONTINUOUS,
    slotted = ZCIO_LAYOUT_SLOTTED,
    blocks = ZCIO_LAYOUT_VARIABLE,
    descriptors = ZCIO_LAYOUT_DESCRIPTORS,
    index = ZCIO_LAYOUT_INDEX,
};
/// What a full ring does (Rust's Overflow; ZCIO_OVERFLOW_*): wait for the
/// slowest reader, drop the new block (srp), overwrite the oldest (frp), or both (mrp).
enum class ring_overflow {
    block = ZCIO_OVERFLOW_BLOCK,
    srp = ZCIO_OVERFLOW_SRP,
    frp = ZCIO_OVERFLOW_FRP,
    mrp = ZCIO_OVERFLOW_MRP,
};

/// How a producer creates a ring (struct zcio_ring_options, zcio_ring_open_with).
struct ring_options {
    std::size_t size = 1 << 20;                          // data bytes: a power of two, 4 KiB..16 GiB
    ring_layout layout = ring_layout::stream;
    ring_overflow overflow = ring_overflow::block;
    mode_t mode = 0600;
    bool create = true;                                  // create it if missing
    bool exclusive = false;                              // fail if it exists
    std::size_t slot_size = 0;                           // slotted: slot bytes (0: the default, 2048)
    std::size_t entries = 0;                             // descriptors, index: entries (0: the default, 4096)

    /// zcio_ring_open's flags (the stream and blocks layouts only).
    int flags() const noexcept {
        int f = 0;
        if (create) f |= ZCIO_O_CREAT;
        if (exclusive) f |= ZCIO_O_EXCL;
        if (layout == ring_layout::blocks) f |= ZCIO_O_BLOCKS;
        switch (overflow) {
        case ring_overflow::block: break;
        case ring_overflow::srp: f |= ZCIO_O_SRP; break;
        case ring_overflow::frp: f |= ZCIO_O_FRP; break;
        case ring_overflow::mrp: f |= ZCIO_O_MRP; break;
        }
        return f;
    }
    /// The C options (zcio_ring_options_init's defaults, then these fields).
    zcio_ring_options native() const {
        zcio_ring_options o{};
        detail::check(zcio_ring_options_init(&o, sizeof o), "zcio_ring_options_init");
        o.layout = static_cast<std::uint32_t>(layout);
        o.overflow = static_cast<std::uint32_t>(overflow);
        o.size = size;
        if (slot_size) o.slot_size = slot_size;
        if (entries) o.entries = entries;
        o.mode = static_cast<std::uint32_t>(mode);
        return o;
    }
};

using ring_stats = zcio_ring_stats;
using ring_counters = zcio_ring_counters;
/// A snapshot of a ring by name (zcio_ring_stat): layout, sizes, owner, producer state, counters.
using ring_stat_info = zcio_ring_stat_info;
/// One consumer of a ring (zcio_ring_stat_consumers).
using ring_consumer_info = zcio_ring_consumer_info;

namespace detail {
/// What ring producers and consumers share: the handle and its wait, set
/// only when it changes (the C wait is a property of the handle).
class ring_end {
  public:
    ring_stats stats() const {
        ring_stats s{};
        check(zcio_ring_get_stats(r_.get(), &s), "zcio_ring_get_stats");
        return s;
    }
    ring_counters counters() const {
        ring_counters c{};
        check(zcio_ring_get_counters(r_.get(), &c, sizeof c), "zcio_ring_get_counters");
        return c;
    }
    /// The bound of this end's plain waits (write, read, peek, reserve without
    /// try_/_for): 10 s for a producer, one hour for a consumer by default;
    /// zcio::forever for none (zcio_ring_set_wait_bound).
    template <class Rep, class Period> void set_wait_bound(std::chrono::duration<Rep, Period> d) {
        int ms = bound_ms(d);
        check(zcio_ring_set_wait_bound(r_.get(), ms), "zcio_ring_set_wait_bound");
    }
    /// This end's bound (zcio_ring_wait_bound); zcio::forever when it has none.
    std::chrono::milliseconds wait_bound() const {
        return std::chrono::milliseconds(check(zcio_ring_wait_bound(r_.get()), "zcio_ring_wait_bound"));
    }
    /// Event loops, after the fd polled readable or 50 ms passed (zcio_ring_doorbell_rang).
    void doorbell_rang() { check(zcio_ring_doorbell_rang(r_.get()), "zcio_ring_doorbell_rang"); }
    zcio_ring *native_handle() const noexcept { return r_.get(); }

  protected:
    ring_end(const std::string &name, int flags, mode_t mode, std::size_t size) {
        zcio_ring *r = nullptr;
        check(zcio_ring_open(name.c_str(), flags, mode, size, &r), "zcio_ring_open");
        r_.reset(r);
    }
    ring_end(const std::string &name, int flags, const std::optional<zcio_ring_options> &o) {
        zcio_ring *r = nullptr;
        check(zcio_ring_open_with(name.c_str(), flags, o ? &*o : nullptr, o ? sizeof *o : 0, &r),
              "zcio_ring_open_with");
        r_.reset(r);
    }
    void wait(int ms) {
        if (ms != ms_) {
            check(zcio_ring_set_timeout(r_.get(), ms), "zcio_ring_set_timeout");
            ms_ = ms;
        }
    }
    owned<zcio_ring, free_ring> r_;
    int ms_ = ZCIO_TIMEOUT_DEFAULT;
};

inline int producer_flags(const ring_options &o) noexcept {
    return ZCIO_O_WRONLY | (o.create ? ZCIO_O_CREAT : 0) | (o.exclusive ? ZCIO_O_EXCL : 0);
}
} // namespace detail

class ring_producer;
class ring_consumer;

/// Room reserved in a ring for one block, being filled in place (reserve ->
/// fill -> commit; Rust's Reservation). bytes() is writable by this process
/// only; std::move(r).commit(len, tag) publishes its first len bytes as one
/// block; destroying it uncommitted (or std::move(r).abort()) publishes
/// nothing. While it lives its producer takes no other call (they throw
/// error_kind::busy); it must end before its producer is destroyed.
class ring_reservation {
  public:
    ring_reservation(ring_reservation &&o) noexcept : r_(std::exchange(o.r_, nullptr)), room_(o.room_) {}
    ring_reservation &operator=(ring_reservation &&o) noexcept {
        if (this != &o) {
            drop();
            r_ = std::exchange(o.r_, nullptr);
            room_ = o.room_;
        }
        return *this;
    }
    ring_reservation(const ring_reservation &) = delete;
    ring_reservation &operator=(const ring_reservation &) = delete;
    ~ring_reservation() { drop(); }
    /// false once committed, aborted or moved from.
    explicit operator bool() const noexcept { return r_ != nullptr; }
    /// The room: write up to capacity() bytes here (the only writable view of a ring).
    std::span<std::byte> bytes() const noexcept { return r_ ? room_ : std::span<std::byte>(); }
    std::size_t capacity() const noexcept { return bytes().size(); }
    /// Publish the first `len` bytes (which you wrote) as one block with
    /// classification `tag` (ring_peek::tag; a stream keeps no tag).
    /// len > capacity() throws invalid_input and leaves the reservation open.
    void commit(std::size_t len, std::uint32_t tag = 0) && {
        if (!r_) throw error(-EINVAL, "zcio_ring_commit", "the reservation has ended");
        if (len > room_.size()) throw error(-EINVAL, "zcio_ring_commit", "len is larger than the reserved room");
        int rc = zcio_ring_commit(r_, len, tag);
        if (rc == 0 || rc == -ZCIO_ECORRUPT) r_ = nullptr; // ended either way
        detail::check(rc, "zcio_ring_commit");
    }
    /// Drop the room without publishing anything.
    void abort() && { drop(); }

  private:
    friend class ring_producer;
    ring_reservation(zcio_ring *r, std::span<std::byte> room) noexcept : r_(r), room_(room) {}
    void drop() noexcept {
        if (r_) (void)zcio_ring_abort(std::exchange(r_, nullptr));
    }
    zcio_ring *r_;
    std::span<std::byte> room_;
};

/// A ring block (or stream bytes) held in place by a consumer: the bytes
/// are volatile (any process attached can write them, FRP/MRP overwrite
/// them). std::move(p).release() says whether it stayed intact; destroying
/// it releases it without asking. Empty (!p) at the end of the stream.
class ring_peek {
  public:
    ring_peek(ring_peek &&o) noexcept : r_(std::exchange(o.r_, nullptr)), data_(o.data_) {}
    ring_peek &operator=(ring_peek &&o) noexcept {
        if (this != &o) {
            drop();
            r_ = std::exchange(o.r_, nullptr);
            data_ = o.data_;
        }
        return *this;
    }
    ~ring_peek() { drop(); }
    /// false at the end of the stream.
    explicit operator bool() const noexcept { return r_ != nullptr; }
    std::span<const std::byte> bytes() const noexcept { return data_; }
    std::size_t size() const noexcept { return data_.size(); }
    /// The block's classification tag (zcio_ring_peek_tag; 0 for a stream or an untagged write).
    std::uint32_t tag() const {
        std::uint32_t t = 0;
        detail::check(zcio_ring_peek_tag(held(), &t), "zcio_ring_peek_tag");
        return t;
    }
    /// Whether the block is still intact so far (zcio_ring_peek_is_intact):
    /// what you copied out before this call is good if true.
    bool is_intact() const {
        return detail::check(zcio_ring_peek_is_intact(held()), "zcio_ring_peek_is_intact") == 1;
    }
    /// Done with it: true if it stayed intact, false if the producer
    /// overwrote it meanwhile (discard what you read; the cursor skipped ahead).
    bool release() && {
        if (!r_) return true;
        int rc = zcio_ring_release(std::exchange(r_, nullptr));
        if (rc == -ZCIO_ELAPPED) return false;
        detail::check(rc, "zcio_ring_release");
        return true;
    }

  private:
    friend class ring_consumer;
    friend class ring_producer;
    ring_peek() noexcept : r_(nullptr) {}
    ring_peek(zcio_ring *r, std::span<const std::byte> d) noexcept : r_(r), data_(d) {}
    zcio_ring *held() const {
        if (!r_) throw error(-EINVAL, "zcio::ring_peek", "nothing is peeked (the end of the stream, or released)");
        return r_;
    }
    void drop() noexcept {
        if (r_) (void)zcio_ring_release(std::exchange(r_, nullptr));
    }
    zcio_ring *r_;
    std::span<const std::byte> data_;
};

/// The producer of a named ring. Destroying it ends the stream (consumers
/// read what is left, then the end); std::move(p).close_with_error(code)
/// ends it with an error. Writes copy in; reserve() fills the ring in place.
class ring_producer : public detail::ring_end {
  public:
    /// Open (by default create) ring `name` as its producer: any layout
    /// (zcio_ring_open_with); an existing ring keeps its own parameters.
    explicit ring_producer(const std::string &name, const ring_options &o = {})
        : ring_end(name, detail::producer_flags(o), o.create ? std::optional(o.native()) : std::nullopt) {}
    ring_producer(ring_producer &&) noexcept = default;
    ring_producer &operator=(ring_producer &&) noexcept = default;

    /// Write `bytes` (a stream takes any length; a block ring one block),
    /// waiting up to the producer's bound (10 s) for room.
    std::size_t write(std::span<const std::byte> bytes) { return *put(bytes, 0, ZCIO_TIMEOUT_DEFAULT); }
    /// Write what fits now; nullopt if nothing did.
    std::optional<std::size_t> try_write(std::span<const std::byte> bytes) { return put(bytes, 0, 0); }
    template <class Rep, class Period>
    std::optional<std::size_t> write_for(std::span<const std::byte> bytes, std::chrono::duration<Rep, Period> d) {
        return put(bytes, 0, detail::timeout_ms(d));
    }
    /// Write one block carrying classification `tag` (zcio_ring_write_tagged;
    /// consumers read it with ring_peek::tag; a stream keeps no tag).
    std::size_t write_tagged(std::span<const std::byte> bytes, std::uint32_t tag) {
        return *put(bytes, tag, ZCIO_TIMEOUT_DEFAULT);
    }
    std::optional<std::size_t> try_write_tagged(std::span<const std::byte> bytes, std::uint32_t tag) {
        return put(bytes, tag, 0);
    }
    template <class Rep, class Period>
    std::optional<std::size_t> write_tagged_for(std::span<const std::byte> bytes, std::uint32_t tag,
                                                std::chrono::duration<Rep, Period> d) {
        return put(bytes, tag, detail::timeout_ms(d));
    }
    /// Copy `parts` in, one after the other, as one block with `tag`
    /// (zcio_ring_write_gather; at most 1024 parts). Returns the bytes written.
    std::size_t write_gather(std::span<const std::span<const std::byte>> parts, std::uint32_t tag = 0) {
        return *gather(parts, tag, ZCIO_TIMEOUT_DEFAULT);
    }
    std::size_t write_gather(std::initializer_list<std::span<const std::byte>> parts, std::uint32_t tag = 0) {
        return write_gather(std::span(parts.begin(), parts.size()), tag);
    }
    std::optional<std::size_t> try_write_gather(std::span<const std::span<const std::byte>> parts,
                                                std::uint32_t tag = 0) {
        return gather(parts, tag, 0);
    }
    template <class Rep, class Period>
    std::optional<std::size_t> write_gather_for(std::span<const std::span<const std::byte>> parts, std::uint32_t tag,
                                                std::chrono::duration<Rep, Period> d) {
        return gather(parts, tag, detail::timeout_ms(d));
    }
    /// Reserve room for one block of up to `n` bytes (>= 1), waiting up to
    /// the producer's bound (zcio_ring_reserve). Not for index rings (unsupported).
    ring_reservation reserve(std::size_t n) { return *room(n, ZCIO_TIMEOUT_DEFAULT); }
    std::optional<ring_reservation> try_reserve(std::size_t n) { return room(n, 0); }
    template <class Rep, class Period>
    std::optional<ring_reservation> reserve_for(std::size_t n, std::chrono::duration<Rep, Period> d) {
        return room(n, detail::timeout_ms(d));
    }
    /// Ring to ring (zcio_ring_splice): write the block `block` (peeked from
    /// another ring by a consumer in this process) into this ring: into an
    /// index ring a rich pointer to it (no copy), else a copy with its tag.
    /// `block` stays peeked (release it as usual).
    void splice(const ring_peek &block) { (void)link(block, ZCIO_TIMEOUT_DEFAULT); }
    bool try_splice(const ring_peek &block) { return link(block, 0); }
    template <class Rep, class Period> bool splice_for(const ring_peek &block, std::chrono::duration<Rep, Period> d) {
        return link(block, detail::timeout_ms(d));
    }
    /// Consumers attached now (zcio_ring_consumers); with `live`, first evict
    /// those whose process died.
    unsigned consumers(bool live = false) {
        return static_cast<unsigned>(detail::check(zcio_ring_consumers(r_.get(), live ? 1 : 0), "zcio_ring_consumers"));
    }
    /// Wait until `n` live consumers are attached, at most `d`; returns how many are.
    template <class Rep = long, class Period = std::milli>
    unsigned wait_consumers(unsigned n, std::chrono::duration<Rep, Period> d = std::chrono::milliseconds(-1)) {
        int ms = d < d.zero() ? ZCIO_TIMEOUT_DEFAULT : detail::timeout_ms(d);
        return static_cast<unsigned>(
            detail::check(zcio_ring_wait_consumers(r_.get(), n, ms), "zcio_ring_wait_consumers"));
    }
    /// End the stream with an error: consumers get producer_failed after what was written.
    void close_with_error(std::uint32_t code) && { zcio_ring_close_error(r_.release(), code); }
    /// Event loops: the producer's named bell (zcio_ring_doorbell), for a write that would block.
    int fd() const { return detail::check(zcio_ring_doorbell(r_.get()), "zcio_ring_doorbell"); }
    /// true: sleep on fd() (or 50 ms); false: write again now.
    bool prepare_write_sleep(std::size_t len) {
        return detail::check(zcio_ring_prepare_write_sleep(r_.get(), len), "zcio_ring_prepare_write_sleep") == 1;
    }

  private:
    std::optional<std::size_t> put(std::span<const std::byte> b, std::uint32_t tag, int ms) {
        wait(ms);
        ssize_t n = tag ? zcio_ring_write_tagged(r_.get(), b.data(), b.size(), tag)
                        : zcio_ring_write(r_.get(), b.data(), b.size());
        if (n >= 0) return static_cast<std::size_t>(n);
        if (detail::quiet(n, ms)) return std::nullopt;
        detail::raise(n, tag ? "zcio_ring_write_tagged" : "zcio_ring_write");
    }
    std::optional<std::size_t> gather(std::span<const std::span<const std::byte>> parts, std::uint32_t tag, int ms) {
        std::vector<zcio_iovec> v;
        v.reserve(parts.size());
        for (auto p : parts) v.push_back(zcio_iovec{p.data(), p.size()});
        wait(ms);
        ssize_t n = zcio_ring_write_gather(r_.get(), v.data(), v.size(), tag);
        if (n >= 0) return static_cast<std::size_t>(n);
        if (detail::quiet(n, ms)) return std::nullopt;
        detail::raise(n, "zcio_ring_write_gather");
    }
    std::optional<ring_reservation> room(std::size_t n, int ms) {
        wait(ms);
        void *data = nullptr;
        std::size_t cap = 0;
        int rc = zcio_ring_reserve(r_.get(), n, &data, &cap);
        if (rc == 0) return ring_reservation(r_.get(), {static_cast<std::byte *>(data), cap});
        if (detail::quiet(rc, ms)) return std::nullopt;
        detail::raise(rc, "zcio_ring_reserve");
    }
    bool link(const ring_peek &block, int ms) {
        zcio_ring *src = block.held();
        wait(ms);
        int rc = zcio_ring_splice(r_.get(), src);
        if (rc == 0) return true;
        if (detail::quiet(rc, ms)) return false;
        detail::raise(rc, "zcio_ring_splice");
    }
};

/// A consumer of a named ring: reads by copy (read) or in place (peek).
class ring_consumer : public detail::ring_end {
  public:
    enum class start { newest, oldest };
    /// Attach to ring `name`; with `create_size` > 0 it is created (a byte
    /// stream of that size) if missing.
    explicit ring_consumer(const std::string &name, start from = start::newest, std::size_t create_size = 0)
        : ring_end(name,
                   ZCIO_O_RDONLY | (from == start::oldest ? ZCIO_O_OLDEST : 0) | (create_size ? ZCIO_O_CREAT : 0),
                   0600, create_size) {}
    /// Attach to ring `name`, creating it with `o` (any layout) if missing and
    /// `o.create`: a consumer attached before its producer starts sees every block.
    ring_consumer(const std::string &name, const ring_options &o, start from = start::newest)
        : ring_end(name,
                   ZCIO_O_RDONLY | (from == start::oldest ? ZCIO_O_OLDEST : 0) | (o.create ? ZCIO_O_CREAT : 0) |
                       (o.exclusive ? ZCIO_O_EXCL : 0),
                   o.create ? std::optional(o.native()) : std::nullopt) {}
    ring_consumer(ring_consumer &&) noexcept = default;
    ring_consumer &operator=(ring_consumer &&) noexcept = default;

    /// Copy the next data into `out` (a whole block of a block ring), waiting
    /// up to the consumer's bound (one hour). 0: the end of the stream.
    std::size_t read(std::span<std::byte> out) {
        wait(ZCIO_TIMEOUT_DEFAULT);
        ssize_t n = zcio_ring_read(r_.get(), out.data(), out.size());
        if (n < 0) detail::raise(n, "zcio_ring_read");
        return static_cast<std::size_t>(n);
    }
    std::optional<std::size_t> try_read(std::span<std::byte> out) { return get(out, 0); }
    /// Event loops, step 2 of a read (zcio_ring_prepare_read_sleep): true:
    /// sleep on fd() (or 50 ms); false: something came meanwhile, read again now.
    bool prepare_read_sleep() {
        return detail::check(zcio_ring_prepare_read_sleep(r_.get()), "zcio_ring_prepare_read_sleep") == 1;
    }
    template <class Rep, class Period>
    std::optional<std::size_t> read_for(std::span<std::byte> out, std::chrono::duration<Rep, Period> d) {
        return get(out, detail::timeout_ms(d));
    }
    /// The next data in place (at most `max` bytes of a stream; a whole block).
    ring_peek peek(std::size_t max = SIZE_MAX) {
        wait(ZCIO_TIMEOUT_DEFAULT);
        const void *data = nullptr;
        std::size_t len = 0;
        int rc = zcio_ring_peek(r_.get(), max, &data, &len);
        if (rc == 1) return ring_peek(r_.get(), {static_cast<const std::byte *>(data), len});
        if (rc == 0) return ring_peek();
        detail::raise(rc, "zcio_ring_peek");
    }
    std::optional<ring_peek> try_peek(std::size_t max = SIZE_MAX) { return look(max, 0); }
    template <class Rep, class Period>
    std::optional<ring_peek> peek_for(std::size_t max, std::chrono::duration<Rep, Period> d) {
        return look(max, detail::timeout_ms(d));
    }
    enum class whence { current = ZCIO_SEEK_CUR, newest = ZCIO_SEEK_NEWEST, oldest = ZCIO_SEEK_OLDEST };
    /// Move the cursor (lseek-like); returns the new position.
    std::int64_t seek(std::int64_t offset, whence w = whence::current) {
        return detail::check(zcio_ring_seek(r_.get(), offset, static_cast<int>(w)), "zcio_ring_seek");
    }
    /// Event loops: polls readable when the ring has news (zcio_ring_fd):
    /// poll it (with a 50 ms timeout, then doorbell_rang()), then
    /// try_read/try_peek until nullopt, which re-arms it.
    int fd() const { return detail::check(zcio_ring_fd(r_.get()), "zcio_ring_fd"); }

  private:
    std::optional<std::size_t> get(std::span<std::byte> out, int ms) {
        wait(ms);
        ssize_t n = zcio_ring_read(r_.get(), out.data(), out.size());
        if (n >= 0) return static_cast<std::size_t>(n);
        if (detail::quiet(n, ms)) return std::nullopt;
        detail::raise(n, "zcio_ring_read");
    }
    std::optional<ring_peek> look(std::size_t max, int ms) {
        wait(ms);
        const void *data = nullptr;
        std::size_t len = 0;
        int rc = zcio_ring_peek(r_.get(), max, &data, &len);
        if (rc == 1) return ring_peek(r_.get(), {static_cast<const std::byte *>(data), len});
        if (rc == 0) return ring_peek();
        if (detail::quiet(rc, ms)) return std::nullopt;
        detail::raise(rc, "zcio_ring_peek");
    }
};

/// Remove ring `name` (attached processes keep using it); false if it did not exist.
inline bool ring_unlink(const std::string &name) {
    int rc = zcio_ring_unlink(name.c_str());
    if (rc == -ENOENT) return false;
    detail::check(rc, "zcio_ring_unlink");
    return true;
}

namespace detail {
/// A string a C call writes like snprintf (call(buf, size) returns the whole length).
template <class F> inline std::string snprintf_string(F call, const char *op) {
    std::string s;
    for (;;) {
        std::size_t cap = s.size();
        auto n = check(call(cap ? s.data() : nullptr, cap), op);
        if (static_cast<std::size_t>(n) < cap) {
            s.resize(static_cast<std::size_t>(n));
            return s;
        }
        s.assign(static_cast<std::size_t>(n) + 1, '\0'); // (it may grow meanwhile: ask again)
    }
}
} // namespace detail

/// The names of the rings in the ring directory, in no set order (zcio_ring_list).
inline std::vector<std::string> ring_list() {
    std::string all = detail::snprintf_string(
        [](char *b, std::size_t n) { return zcio_ring_list(b, n); }, "zcio_ring_list");
    std::vector<std::string> names;
    for (std::size_t at = 0; at < all.size();) {
        std::size_t nl = all.find('\n', at);
        if (nl == std::string::npos) nl = all.size();
        if (nl > at) names.push_back(all.substr(at, nl - at));
        at = nl + 1;
    }
    return names;
}
/// The ring directory: $ZCIO_RING_DIR, else /dev/shm (zcio_ring_dir).
inline std::string ring_dir() {
    return detail::snprintf_string([](char *b, std::size_t n) { return zcio_ring_dir(b, n); }, "zcio_ring_dir");
}
/// The file of ring `name`, DIR/zcio-ring.NAME (zcio_ring_path); invalid_input for a bad name.
inline std::string ring_path(const std::string &name) {
    return detail::snprintf_string([&](char *b, std::size_t n) { return zcio_ring_path(name.c_str(), b, n); },
                                   "zcio_ring_path");
}
/// A snapshot of ring `name` without attaching (zcio_ring_stat): read permission is enough.
inline ring_stat_info ring_stat(const std::string &name) {
    ring_stat_info s{};
    detail::check(zcio_ring_stat(name.c_str(), &s, sizeof s), "zcio_ring_stat");
    return s;
}
/// The consumers of ring `name` (zcio_ring_stat_consumers).
inline std::vector<ring_consumer_info> ring_stat_consumers(const std::string &name) {
    std::vector<ring_consumer_info> v(ZCIO_RING_MAX_CONSUMERS);
    int n = detail::check(zcio_ring_stat_consumers(name.c_str(), v.data(), v.size(), sizeof(ring_consumer_info)),
                          "zcio_ring_stat_consumers");
    v.resize(std::min<std::size_t>(static_cast<std::size_t>(n), v.size()));
    return v;
}

// ---------------------------------------------------------- typed messages

template <class T> class typed;

/// A pool buffer holding a T after its type tag, being filled in place
/// (reserve -> fill -> send): value() is the T; std::move(b).freeze() -> message.
template <class T> class typed_buffer {
  public:
    typed_buffer(typed_buffer &&) noexcept = default;
    typed_buffer &operator=(typed_buffer &&) noexcept = default;
    T &value() noexcept { return *value_; }
    T *operator->() noexcept { return value_; }
    T &operator*() noexcept { return *value_; }
    message freeze() && { return std::move(buf_).freeze(); }

  private:
    friend class typed<T>;
    typed_buffer(buffer &&b, T *v) noexcept : buf_(std::move(b)), value_(v) {}
    buffer buf_;
    T *value_;
};

/// Typed messages: a T with the 128-byte type tag Rust's zcio::typed writes
/// (Tag::new(name, schema) plus the layout of T), made and checked by the C
/// library's own zcio_type_tag / zcio_msg_read_typed, so the bytes are those
/// of a Rust TypedBuf<T> and of C's zcio_send_typed. T must be trivially
/// copyable and should have no padding bytes (add explicit reserved fields).
/// The receiver checks the tag (name, version, size, alignment) and size
/// only: validate fields such as bools, enums and lengths of the copy.
template <class T> class typed {
    static_assert(std::is_trivially_copyable_v<T>, "zcio::typed<T> needs a trivially copyable T");
    static_assert(!std::is_reference_v<T> && !std::is_array_v<T>, "zcio::typed<T>: T is a struct or scalar");

  public:
    /// The type as Rust's Tag::new(name, schema) names it.
    typed(std::string name, std::uint32_t schema) : name_(std::move(name)), schema_(schema) {}
    /// Untagged: only the length is checked.
    static typed untagged() { return typed(); }

    /// The C description (name, schema, sizeof T, alignof T).
    zcio_type type() const noexcept {
        return zcio_type{tagged_ ? name_.c_str() : nullptr, schema_, sizeof(T), alignof(T), 0};
    }
    /// Where the value starts in the message: max(128, alignof T), or 0 untagged.
    /// (zcio_type_tag's offset: the 128-byte tag, padded to T's alignment.)
    std::size_t offset() const noexcept { return tagged_ ? std::max<std::size_t>(128, alignof(T)) : 0; }
    /// Reserve a pool buffer for the tag and a T, write the tag, and
    /// value-initialise the T in place (fill it, then freeze and send).
    typed_buffer<T> alloc(pool &p, const T &init = T{}) const {
        zcio_type t = type();
        std::size_t off = offset();
        buffer b = p.alloc(off + sizeof(T));
        auto d = b.data();
        if (reinterpret_cast<std::uintptr_t>(d.data() + off) % alignof(T) != 0)
            throw error(-EINVAL, "zcio::typed::alloc", "the pool's buffer is not aligned for T");
        if (off) detail::check(zcio_type_tag(&t, d.data(), off), "zcio_type_tag");
        T *v = ::new (static_cast<void *>(d.data() + off)) T(init);
        return typed_buffer<T>(std::move(b), v);
    }
    /// Copy `v` into a typed message in the channel's own pool and send it (zcio_send_typed).
    void send(channel &ch, const T &v) const {
        zcio_type t = type();
        detail::check(zcio_send_typed(ch.native_handle(), &t, &v, sizeof(T), ZCIO_TIMEOUT_DEFAULT),
                      "zcio_send_typed");
    }
    /// Check a received message's tag and size and copy the T out (read once:
    /// the copy cannot change). Throws malformed for another type or version.
    T read(const message &m) const {
        if (!m.is_received())
            throw error(-EINVAL, "zcio::typed::read", "read_typed takes a received message");
        zcio_type t = type();
        std::array<std::byte, sizeof(T)> out;
        auto n = detail::check(zcio_msg_read_typed(m.native_handle(), &t, out.data(), out.size()),
                               "zcio_msg_read_typed");
        if (static_cast<std::size_t>(n) != sizeof(T))
            throw error(-EBADMSG, "zcio::typed::read", "payload is not one T");
        return std::bit_cast<T>(out);
    }
    const std::string &name() const noexcept { return name_; }
    std::uint32_t schema() const noexcept { return schema_; }

  private:
    typed() : tagged_(false) {}
    std::string name_;
    std::uint32_t schema_ = 0;
    bool tagged_ = true;
};

template <class H, class E> class typed_flex;

/// A pool buffer holding a typed_flex<H, E> value after its type tag, being
/// filled in place: head() and tail() (n elements) are writable;
/// std::move(b).freeze() -> message.
template <class H, class E> class typed_flex_buffer {
  public:
    typed_flex_buffer(typed_flex_buffer &&) noexcept = default;
    typed_flex_buffer &operator=(typed_flex_buffer &&) noexcept = default;
    H &head() noexcept { return *head_; }
    std::span<E> tail() noexcept { return tail_; }
    message freeze() && { return std::move(buf_).freeze(); }

  private:
    friend class typed_flex<H, E>;
    typed_flex_buffer(buffer &&b, H *h, std::span<E> t) noexcept : buf_(std::move(b)), head_(h), tail_(t) {}
    buffer buf_;
    H *head_;
    std::span<E> tail_;
};

/// Typed messages ending in a flexible array member (zcio_type's elem_size):
/// a header H then any number of elements E, the bytes of C's
/// `struct { H's fields; E tail[]; }` and of Rust's typed types with a
/// slice tail (zcio_send_typed / zcio_msg_read_typed check them). C++ has no
/// flexible array members, so the message is the pair: send(ch, head, tail)
/// with tail a std::span<const E>, read(m) copies both out. The layout
/// must have no padding at any length (checked at compile time): the
/// elements start right after H, and each adds a multiple of the alignment.
template <class H, class E> class typed_flex {
    static_assert(std::is_trivially_copyable_v<H> && std::is_trivially_copyable_v<E>,
                  "zcio::typed_flex<H, E> needs trivially copyable H and E");
    static constexpr std::size_t align_ = std::max(alignof(H), alignof(E));
    static_assert(sizeof(H) % alignof(E) == 0, "zcio::typed_flex: the elements must start right after H");
    static_assert(sizeof(E) % align_ == 0,
                  "zcio::typed_flex: each element must add a multiple of the alignment (no padding at any length)");

  public:
    /// A received value: the header and a copy of the elements.
    struct value {
        H head;
        std::vector<E> tail;
    };
    /// The type as Rust's Tag::new(name, schema) names it.
    typed_flex(std::string name, std::uint32_t schema) : name_(std::move(name)), schema_(schema) {}
    /// The C description (name, schema, sizeof H, the alignment, sizeof E).
    zcio_type type() const noexcept { return zcio_type{name_.c_str(), schema_, sizeof(H), align_, sizeof(E)}; }
    /// Reserve a pool buffer for the tag, a header and `n` elements, write the
    /// tag, and value-initialise them in place (fill them, then freeze and send).
    typed_flex_buffer<H, E> alloc(pool &p, std::size_t n, const H &head = H{}) const {
        zcio_type t = type();
        std::size_t off = std::max<std::size_t>(128, align_);
        if (n > (SIZE_MAX - off - sizeof(H)) / sizeof(E))
            throw error(-EINVAL, "zcio::typed_flex::alloc", "too many elements");
        buffer b = p.alloc(off + sizeof(H) + n * sizeof(E));
        auto d = b.data();
        if (reinterpret_cast<std::uintptr_t>(d.data() + off) % align_ != 0)
            throw error(-EINVAL, "zcio::typed_flex::alloc", "the pool's buffer is not aligned for the type");
        detail::check(zcio_type_tag(&t, d.data(), off), "zcio_type_tag");
        H *h = ::new (static_cast<void *>(d.data() + off)) H(head);
        std::byte *at = d.data() + off + sizeof(H);
        E *e = nullptr;
        for (std::size_t i = 0; i < n; i++) {
            E *x = ::new (static_cast<void *>(at + i * sizeof(E))) E();
            if (i == 0) e = x;
        }
        return typed_flex_buffer<H, E>(std::move(b), h, std::span<E>(e, n));
    }
    /// Copy `head` and `tail` into one typed message in the channel's own pool and send it.
    void send(channel &ch, const H &head, std::span<const E> tail) const {
        std::vector<std::byte> v(sizeof(H) + tail.size_bytes());
        std::memcpy(v.data(), &head, sizeof(H));
        if (!tail.empty()) std::memcpy(v.data() + sizeof(H), tail.data(), tail.size_bytes());
        zcio_type t = type();
        detail::check(zcio_send_typed(ch.native_handle(), &t, v.data(), v.size(), ZCIO_TIMEOUT_DEFAULT),
                      "zcio_send_typed");
    }
    /// Check a received message's tag and size and copy the value out (read
    /// once). Throws malformed for another type, version or a size that is
    /// not sizeof H + n * sizeof E. Validate the fields of the copy.
    value read(const message &m) const {
        if (!m.is_received())
            throw error(-EINVAL, "zcio::typed_flex::read", "read_typed takes a received message");
        zcio_type t = type();
        std::vector<std::byte> out(m.size());
        auto n = static_cast<std::size_t>(detail::check(
            zcio_msg_read_typed(m.native_handle(), &t, out.data(), out.size()), "zcio_msg_read_typed"));
        if (n < sizeof(H) || (n - sizeof(H)) % sizeof(E) != 0)
            throw error(-EBADMSG, "zcio::typed_flex::read", "payload is not a header and whole elements");
        value v{};
        std::memcpy(&v.head, out.data(), sizeof(H));
        v.tail.resize((n - sizeof(H)) / sizeof(E));
        if (!v.tail.empty()) std::memcpy(v.tail.data(), out.data() + sizeof(H), n - sizeof(H));
        return v;
    }
    const std::string &name() const noexcept { return name_; }
    std::uint32_t schema() const noexcept { return schema_; }

  private:
    std::string name_;
    std::uint32_t schema_ = 0;
};

// -------------------------------------------------------------- descriptors

/// A file descriptor owned here (a descriptor received in an envelope):
/// closed when destroyed, unless release()d. Move-only.
class unique_fd {
  public:
    unique_fd() noexcept = default;
    explicit unique_fd(int fd) noexcept : fd_(fd) {}
    unique_fd(unique_fd &&o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    unique_fd &operator=(unique_fd &&o) noexcept {
        if (this != &o) reset(std::exchange(o.fd_, -1));
        return *this;
    }
    unique_fd(const unique_fd &) = delete;
    unique_fd &operator=(const unique_fd &) = delete;
    ~unique_fd() { reset(); }
    /// The descriptor (-1 if empty); still owned here.
    int get() const noexcept { return fd_; }
    explicit operator bool() const noexcept { return fd_ >= 0; }
    /// Give the descriptor up: it is yours to close.
    [[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }
    /// Close the descriptor held (if any) and hold `fd`.
    void reset(int fd = -1) noexcept {
        if (fd_ >= 0 && fd_ != fd) (void)::close(fd_);
        fd_ = fd;
    }

  private:
    int fd_ = -1;
};

// ----------------------------------------------------------- the rendezvous

/// A rendezvous message (struct zcio_envelope): a label, up to 8 data words
/// and up to 16 file descriptors. Move-only.
///
/// Sending borrows: the descriptors set with set_fds() stay the caller's
/// (the partner gets duplicates); keep them open until the send returns.
/// Receiving owns: the descriptors of a received envelope are new
/// descriptors of this process, closed when the envelope is destroyed
/// unless taken out with take_fds() (then each unique_fd closes its own).
class envelope {
  public:
    static constexpr std::size_t max_words = ZCIO_ENVELOPE_WORDS;
    static constexpr std::size_t max_fds = ZCIO_ENVELOPE_MAX_FDS;

    envelope() noexcept { clear(); }
    /// A message to send: `label`, `words` (at most 8), borrowed `fds` (at most 16).
    explicit envelope(std::uint64_t label, std::span<const std::uint64_t> words = {}, std::span<const int> fds = {}) {
        clear();
        e_.label = label;
        set_words(words);
        set_fds(fds);
    }
    envelope(std::uint64_t label, std::initializer_list<std::uint64_t> words, std::initializer_list<int> fds = {})
        : envelope(label, std::span<const std::uint64_t>(words.begin(), words.size()),
                   std::span<const int>(fds.begin(), fds.size())) {}
    envelope(envelope &&o) noexcept : e_(o.e_), owned_(std::exchange(o.owned_, false)) { o.clear(); }
    envelope &operator=(envelope &&o) noexcept {
        if (this != &o) {
            close_owned();
            e_ = o.e_;
            owned_ = std::exchange(o.owned_, false);
            o.clear();
        }
        return *this;
    }
    envelope(const envelope &) = delete;
    envelope &operator=(const envelope &) = delete;
    ~envelope() { close_owned(); }

    std::uint64_t label() const noexcept { return e_.label; }
    void set_label(std::uint64_t label) noexcept { e_.label = label; }
    /// The data words (0..8 of them).
    std::span<const std::uint64_t> words() const noexcept { return {e_.words, e_.nwords}; }
    /// Word `i` (0 beyond the words carried).
    std::uint64_t word(std::size_t i) const noexcept { return i < e_.nwords ? e_.words[i] : 0; }
    void set_words(std::span<const std::uint64_t> words) {
        if (words.size() > max_words)
            throw error(-EMSGSIZE, "zcio::envelope::set_words", "an envelope carries at most 8 words");
        std::fill(std::begin(e_.words), std::end(e_.words), 0);
        std::copy(words.begin(), words.end(), e_.words);
        e_.nwords = words.size();
    }
    /// The descriptors: borrowed ones to send, or received ones owned here.
    std::span<const int> fds() const noexcept { return {e_.fds, e_.nfds}; }
    /// Whether the descriptors are received ones that this envelope closes.
    bool owns_fds() const noexcept { return owned_ && e_.nfds > 0; }
    /// Descriptors to send, borrowed (at most 16). Throws invalid_input on
    /// an envelope that still owns received descriptors (take_fds() first).
    void set_fds(std::span<const int> fds) {
        if (owns_fds())
            throw error(-EINVAL, "zcio::envelope::set_fds",
                        "the envelope owns received descriptors: take_fds() them first");
        if (fds.size() > max_fds)
            throw error(-EMSGSIZE, "zcio::envelope::set_fds", "an envelope carries at most 16 descriptors");
        std::fill(std::begin(e_.fds), std::end(e_.fds), -1);
        std::copy(fds.begin(), fds.end(), e_.fds);
        e_.nfds = fds.size();
        owned_ = false;
    }
    /// Take the received descriptors out (the envelope then has none): each
    /// unique_fd closes its own. Borrowed ones are not given (empty result).
    std::vector<unique_fd> take_fds() {
        std::vector<unique_fd> v;
        if (!owned_) return v;
        v.reserve(e_.nfds);
        for (std::size_t i = 0; i < e_.nfds; i++) v.emplace_back(std::exchange(e_.fds[i], -1));
        e_.nfds = 0;
        owned_ = false;
        return v;
    }
    /// The C struct (its descriptors still belong to the envelope).
    const zcio_envelope &native() const noexcept { return e_; }

  private:
    friend class rendezvous;
    friend class proxy_endpoint;
    friend class recv_handle;
    /// A received envelope: its descriptors are owned here.
    static envelope received(const zcio_envelope &e) noexcept {
        envelope m;
        m.e_ = e;
        m.owned_ = true;
        return m;
    }
    void clear() noexcept {
        std::memset(&e_, 0, sizeof e_);
        std::fill(std::begin(e_.fds), std::end(e_.fds), -1);
        owned_ = false;
    }
    void close_owned() noexcept {
        if (!owned_) return;
        for (std::size_t i = 0; i < e_.nfds && i < max_fds; i++)
            if (e_.fds[i] >= 0) (void)::close(e_.fds[i]);
        e_.nfds = 0;
        owned_ = false;
    }
    zcio_envelope e_;
    bool owned_ = false;
};

/// The bounds of a rendezvous endpoint's default waits (zcio_rendezvous_config).
struct rendezvous_config {
    std::chrono::milliseconds send_timeout{10'000};
    std::chrono::milliseconds recv_timeout{3'600'000};
    std::chrono::milliseconds accept_timeout{3'600'000}; // a listener's

    zcio_rendezvous_config to_c() const noexcept {
        zcio_rendezvous_config c;
        zcio_rendezvous_config_init(&c);
        c.send_timeout_ms = detail::bound_ms(send_timeout);
        c.recv_timeout_ms = detail::bound_ms(recv_timeout);
        c.accept_timeout_ms = detail::bound_ms(accept_timeout);
        return c;
    }
};


using rendezvous_stats = zcio_rendezvous_stats;

class rendezvous;

/// What recv_any and reply_and_recv return: which endpoint of the span the
/// message came from, and the message. `auto [i, m] = rendezvous::recv_any(eps);`
struct recv_any_result {
    std::size_t index;
    envelope msg;
};

namespace detail {
inline void free_rdv(zcio_rendezvous *e) { zcio_rendezvous_close(e); }
inline void free_rdv_listener(zcio_rendezvous_listener *l) { zcio_rendezvous_listener_close(l); }
inline void free_proxies(zcio_proxies *p) { zcio_proxies_free(p); }
inline void free_proxy_ep(zcio_proxy_endpoint *p) { zcio_proxy_endpoint_free(p); }
inline void free_ticket(zcio_ticket *t) { zcio_ticket_free(t); }
inline void free_recv_handle(zcio_recv_handle *h) { zcio_recv_handle_free(h); }
} // namespace detail

/// A send in steps for event loops (zcio_rendezvous_send_begin): poll() until
/// true, waiting on the endpoint's fd() (and calling doorbell_rang()) while
/// it is false. Destroying it before it completed gives the send up
/// (zcio_rendezvous_send_cancel). Destroy it before its endpoint.
class pending_send {
  public:
    pending_send(pending_send &&o) noexcept : ep_(std::exchange(o.ep_, nullptr)), seq_(o.seq_) {}
    pending_send &operator=(pending_send &&o) noexcept {
        if (this != &o) {
            drop();
            ep_ = std::exchange(o.ep_, nullptr);
            seq_ = o.seq_;
        }
        return *this;
    }
    ~pending_send() { drop(); }
    /// true: the partner took the message (the send is complete). Throws
    /// disconnected when the partner is gone (the message was taken back).
    bool poll() {
        if (!ep_) return true;
        int rc = zcio_rendezvous_send_poll(ep_, seq_);
        if (rc == 1) {
            ep_ = nullptr;
            return true;
        }
        if (rc == 0) return false;
        if (rc == -EPIPE) ep_ = nullptr; // taken back: nothing left to cancel
        detail::raise(rc, "zcio_rendezvous_send_poll");
    }
    /// Give up: true if the message was taken back undelivered, false if the
    /// partner had already taken it.
    bool cancel() && {
        if (!ep_) return false;
        return detail::check(zcio_rendezvous_send_cancel(std::exchange(ep_, nullptr), seq_),
                             "zcio_rendezvous_send_cancel") == 1;
    }
    /// Whether the send is over (taken, or given up).
    bool done() const noexcept { return ep_ == nullptr; }
    std::uint64_t seq() const noexcept { return seq_; }

  private:
    friend class rendezvous;
    pending_send(zcio_rendezvous *ep, std::uint64_t seq) noexcept : ep_(ep), seq_(seq) {}
    void drop() noexcept {
        if (ep_) (void)zcio_rendezvous_send_cancel(std::exchange(ep_, nullptr), seq_);
    }
    zcio_rendezvous *ep_;
    std::uint64_t seq_;
};

/// One end of a rendezvous connection (zcio_rendezvous): small messages
/// (envelopes), unbuffered: a send returns once the partner has taken the
/// message, and a send that fails did not happen. Destroying it hangs up
/// (the partner's waits end with disconnected). Thread-safe.
class rendezvous {
  public:
    /// Connect to the listener at `path` (no retries: nobody listening is
    /// not_found, or os with errnum() ECONNREFUSED; the handshake waits at most 5 s).
    static rendezvous connect(const std::string &path, const rendezvous_config &config = {}) {
        zcio_rendezvous_config c = config.to_c();
        zcio_rendezvous *e = nullptr;
        detail::check(zcio_rendezvous_connect(path.c_str(), &c, &e), "zcio_rendezvous_connect");
        return rendezvous(e);
    }
    rendezvous(rendezvous &&) noexcept = default;
    rendezvous &operator=(rendezvous &&) noexcept = default;

    /// Send `m`, waiting up to the send bound for the partner to take it.
    void send(const envelope &m) { (void)put(m, ZCIO_TIMEOUT_DEFAULT); }
    /// Send only to a partner waiting in a receive now: false (not sent) otherwise.
    [[nodiscard]] bool try_send(const envelope &m) { return put(m, 0); }
    /// Send within `d`: false (not sent: taken back) when `d` passed.
    template <class Rep, class Period>
    [[nodiscard]] bool send_for(const envelope &m, std::chrono::duration<Rep, Period> d) {
        return put(m, detail::timeout_ms(d));
    }

    /// The partner's next message, waiting up to the receive bound.
    envelope recv() { return *get(ZCIO_TIMEOUT_DEFAULT); }
    std::optional<envelope> try_recv() { return get(0); }
    template <class Rep, class Period> std::optional<envelope> recv_for(std::chrono::duration<Rep, Period> d) {
        return get(detail::timeout_ms(d));
    }

    /// A remote call: send `m`, then wait for the answer (the partner's next
    /// message); each half up to its own bound.
    envelope call(const envelope &m) { return *ask(m, ZCIO_TIMEOUT_DEFAULT); }
    /// The call within `d` in all; nullopt when `d` passed (the request may
    /// have been taken: the partner's answer then comes to the next receive).
    template <class Rep, class Period>
    std::optional<envelope> call_for(const envelope &m, std::chrono::duration<Rep, Period> d) {
        return ask(m, std::max(1, detail::timeout_ms(d)));
    }

    /// The first message any of `eps` has (a server over several partners),
    /// waiting up to the shortest receive bound among them. A partner that
    /// is gone is skipped while others live; disconnected once all are.
    static recv_any_result recv_any(std::span<rendezvous> eps) { return *any(eps, ZCIO_TIMEOUT_DEFAULT); }
    static recv_any_result recv_any(std::span<rendezvous *const> eps) { return *any(eps, ZCIO_TIMEOUT_DEFAULT); }
    static std::optional<recv_any_result> try_recv_any(std::span<rendezvous> eps) { return any(eps, 0); }
    static std::optional<recv_any_result> try_recv_any(std::span<rendezvous *const> eps) { return any(eps, 0); }
    template <class Rep, class Period>
    static std::optional<recv_any_result> recv_any_for(std::span<rendezvous> eps, std::chrono::duration<Rep, Period> d) {
        return any(eps, detail::timeout_ms(d));
    }
    template <class Rep, class Period>
    static std::optional<recv_any_result> recv_any_for(std::span<rendezvous *const> eps,
                                                       std::chrono::duration<Rep, Period> d) {
        return any(eps, detail::timeout_ms(d));
    }

    /// A server's step: send `reply` to this endpoint's partner (up to the
    /// send bound), then receive the next message from any of `eps` (this
    /// endpoint is usually one of them), as recv_any.
    recv_any_result reply_and_recv(const envelope &reply, std::span<rendezvous> eps) {
        return *any(eps, ZCIO_TIMEOUT_DEFAULT, ep_.get(), &reply);
    }
    recv_any_result reply_and_recv(const envelope &reply, std::span<rendezvous *const> eps) {
        return *any(eps, ZCIO_TIMEOUT_DEFAULT, ep_.get(), &reply);
    }
    /// Both halves within `d`; nullopt when `d` passed (the C call does not
    /// say which half ran out: the reply may have been taken).
    template <class Rep, class Period>
    std::optional<recv_any_result> reply_and_recv_for(const envelope &reply, std::span<rendezvous> eps,
                                                      std::chrono::duration<Rep, Period> d) {
        return any(eps, std::max(1, detail::timeout_ms(d)), ep_.get(), &reply);
    }
    template <class Rep, class Period>
    std::optional<recv_any_result> reply_and_recv_for(const envelope &reply, std::span<rendezvous *const> eps,
                                                      std::chrono::duration<Rep, Period> d) {
        return any(eps, std::max(1, detail::timeout_ms(d)), ep_.get(), &reply);
    }

    /// The partner's kernel credentials (who connected, or whom we connected to).
    peer_cred peer() const {
        peer_cred c{};
        detail::check(zcio_rendezvous_peer(ep_.get(), &c), "zcio_rendezvous_peer");
        return c;
    }
    rendezvous_stats stats() const {
        rendezvous_stats s{};
        detail::check(zcio_rendezvous_get_stats(ep_.get(), &s, sizeof s), "zcio_rendezvous_get_stats");
        return s;
    }
    /// Hang up now, keeping the handle: every wait on it (any thread) and the
    /// partner's end with disconnected.
    void hang_up() { detail::check(zcio_rendezvous_hang_up(ep_.get()), "zcio_rendezvous_hang_up"); }

    /// Event loops: the doorbell (zcio_rendezvous_doorbell; switches the
    /// endpoint to bell mode for good). Loop: try_recv(); prepare_recv_sleep();
    /// poll fd(); doorbell_rang(). The fd belongs to the endpoint.
    int fd() const { return detail::check(zcio_rendezvous_doorbell(ep_.get()), "zcio_rendezvous_doorbell"); }
    /// true: sleep on fd(); false: a message is waiting.
    bool prepare_recv_sleep() {
        return detail::check(zcio_rendezvous_prepare_recv_sleep(ep_.get()), "zcio_rendezvous_prepare_recv_sleep") == 1;
    }
    /// After fd() polled readable; true when the partner is gone (remove the fd).
    bool doorbell_rang() {
        return detail::check(zcio_rendezvous_doorbell_rang(ep_.get()), "zcio_rendezvous_doorbell_rang") == 1;
    }
    /// Event loops: a send in steps (put `m` in the partner's slot without
    /// waiting); one at a time per endpoint (would_block while another is in flight).
    pending_send send_begin(const envelope &m) {
        std::uint64_t seq = 0;
        detail::check(zcio_rendezvous_send_begin(ep_.get(), &m.e_, &seq), "zcio_rendezvous_send_begin");
        return pending_send(ep_.get(), seq);
    }
    zcio_rendezvous *native_handle() const noexcept { return ep_.get(); }

  private:
    friend class rendezvous_listener;
    friend class proxy_endpoint;
    explicit rendezvous(zcio_rendezvous *e) noexcept : ep_(e) {}
    bool put(const envelope &m, int ms) {
        int rc = zcio_rendezvous_send(ep_.get(), &m.e_, ms);
        if (rc == 0) return true;
        if (detail::quiet(rc, ms)) return false;
        detail::raise(rc, "zcio_rendezvous_send");
    }
    std::optional<envelope> get(int ms) {
        zcio_envelope out;
        int rc = zcio_rendezvous_recv(ep_.get(), ms, &out);
        if (rc == 0) return envelope::received(out);
        if (detail::quiet(rc, ms)) return std::nullopt;
        detail::raise(rc, "zcio_rendezvous_recv");
    }
    std::optional<envelope> ask(const envelope &m, int ms) {
        zcio_envelope out;
        int rc = zcio_rendezvous_call(ep_.get(), &m.e_, ms, &out);
        if (rc == 0) return envelope::received(out);
        if (detail::quiet(rc, ms)) return std::nullopt;
        detail::raise(rc, "zcio_rendezvous_call");
    }
    static zcio_rendezvous *handle_of(rendezvous &r) noexcept { return r.ep_.get(); }
    static zcio_rendezvous *handle_of(rendezvous *r) noexcept { return r ? r->ep_.get() : nullptr; }
    template <class Span>
    static std::optional<recv_any_result> any(Span eps, int ms, zcio_rendezvous *to = nullptr,
                                              const envelope *reply = nullptr) {
        constexpr std::size_t inline_n = 32; // no allocation for a server of up to 32 partners
        zcio_rendezvous *small[inline_n];
        std::vector<zcio_rendezvous *> big;
        zcio_rendezvous **p = small;
        if (eps.size() > inline_n) {
            big.resize(eps.size());
            p = big.data();
        }
        for (std::size_t i = 0; i < eps.size(); i++) p[i] = handle_of(eps[i]);
        zcio_envelope out;
        int rc = to ? zcio_rendezvous_reply_and_recv(to, &reply->e_, p, eps.size(), ms, &out)
                    : zcio_rendezvous_recv_any(p, eps.size(), ms, &out);
        if (rc >= 0) return recv_any_result{static_cast<std::size_t>(rc), envelope::received(out)};
        if (detail::quiet(rc, ms)) return std::nullopt;
        detail::raise(rc, to ? "zcio_rendezvous_reply_and_recv" : "zcio_rendezvous_recv_any");
    }
    detail::owned<zcio_rendezvous, detail::free_rdv> ep_;
};

/// Listens for rendezvous connections on a Unix socket
/// (zcio_rendezvous_listener); the socket file is removed when it is destroyed.
class rendezvous_listener {
  public:
    /// Listen on `path` (a stale socket of a dead listener is replaced); the
    /// endpoints it accepts get `config`'s bounds; `access` says who may
    /// connect (empty: this process's effective uid only).
    static rendezvous_listener bind(const std::string &path, const rendezvous_config &config = {},
                                    const access_list &access = {}) {
        zcio_rendezvous_config c = config.to_c();
        zcio_access a{access.uids.data(), access.uids.size(), access.gids.data(), access.gids.size()};
        bool own = access.uids.empty() && access.gids.empty();
        zcio_rendezvous_listener *l = nullptr;
        detail::check(zcio_rendezvous_listen(path.c_str(), &c, own ? nullptr : &a, &l), "zcio_rendezvous_listen");
        return rendezvous_listener(l);
    }
    rendezvous_listener(rendezvous_listener &&) noexcept = default;
    rendezvous_listener &operator=(rendezvous_listener &&) noexcept = default;

    /// One connection, waiting up to the accept bound. A refused caller
    /// (permission_denied) or a broken handshake (protocol) throws; the
    /// listener stays usable.
    rendezvous accept() { return *get(ZCIO_TIMEOUT_DEFAULT); }
    std::optional<rendezvous> try_accept() { return get(0); }
    template <class Rep, class Period> std::optional<rendezvous> accept_for(std::chrono::duration<Rep, Period> d) {
        return get(detail::timeout_ms(d));
    }
    std::string path() const { return zcio_rendezvous_listener_path(l_.get()); }
    /// peers (accepted, still connected), accepted, and the endpoints' own counters.
    rendezvous_stats stats() const {
        rendezvous_stats s{};
        detail::check(zcio_rendezvous_listener_get_stats(l_.get(), &s, sizeof s), "zcio_rendezvous_listener_get_stats");
        return s;
    }
    zcio_rendezvous_listener *native_handle() const noexcept { return l_.get(); }

  private:
    explicit rendezvous_listener(zcio_rendezvous_listener *l) noexcept : l_(l) {}
    std::optional<rendezvous> get(int ms) {
        zcio_rendezvous *e = nullptr;
        int rc = zcio_rendezvous_accept(l_.get(), ms, &e);
        if (rc == 0) return rendezvous(e);
        if (detail::quiet(rc, ms)) return std::nullopt;
        detail::raise(rc, "zcio_rendezvous_accept");
    }
    detail::owned<zcio_rendezvous_listener, detail::free_rdv_listener> l_;
};

// ------------------------------------------- asynchronous IPC: proxy threads

/// What a pool of proxy threads does (zcio_proxy_config).
struct proxy_config {
    std::size_t max_proxies = 64;                   // threads alive at once, send and receive
    std::size_t quota = 4096;                       // messages per partner and direction (>= 1)
    std::chrono::microseconds spin{50};             // busy-wait of a proxy whose queue ran empty
    std::chrono::milliseconds linger{20};           // a parked proxy stays with its queue
    std::chrono::milliseconds idle_exit{10'000};    // an idle thread exits

    zcio_proxy_config to_c() const noexcept {
        zcio_proxy_config c;
        zcio_proxy_config_init(&c);
        c.max_proxies = max_proxies;
        c.quota = quota;
        auto u32 = [](auto v) { return static_cast<std::uint32_t>(std::clamp<long long>(v, 0, UINT32_MAX)); };
        c.spin_us = u32(spin.count());
        c.linger_ms = u32(linger.count());
        c.idle_exit_ms = u32(idle_exit.count());
        return c;
    }
};

using proxy_stats = zcio_proxy_stats;
using proxy_endpoint_stats = zcio_proxy_endpoint_stats;

/// A pool of proxy threads shared by proxy endpoints (zcio_proxies); its
/// threads start on demand and exit when idle. Destroying the handle leaves
/// the endpoints made with it working. Thread-safe.
class proxies {
  public:
    explicit proxies(const proxy_config &config = {}) {
        zcio_proxy_config c = config.to_c();
        zcio_proxies *p = nullptr;
        detail::check(zcio_proxies_new(&c, &p), "zcio_proxies_new");
        p_.reset(p);
    }
    proxies(proxies &&) noexcept = default;
    proxies &operator=(proxies &&) noexcept = default;
    proxy_stats stats() const {
        proxy_stats s{};
        detail::check(zcio_proxies_get_stats(p_.get(), &s, sizeof s), "zcio_proxies_get_stats");
        return s;
    }
    zcio_proxies *native_handle() const noexcept { return p_.get(); }

  private:
    detail::owned<zcio_proxies, detail::free_proxies> p_;
};

/// Where a queued message stands (zcio_ticket_status).
enum class ticket_status { pending, delivered, failed };

/// The outcome of one message given to proxy_endpoint::send (zcio_ticket).
/// Destroying it does not cancel the send. Thread-safe.
class ticket {
  public:
    ticket(ticket &&) noexcept = default;
    ticket &operator=(ticket &&) noexcept = default;

    /// Now (never waits).
    ticket_status status() const {
        int rc = zcio_ticket_status(t_.get());
        if (rc == ZCIO_TICKET_PENDING) return ticket_status::pending;
        if (rc == ZCIO_TICKET_DELIVERED) return ticket_status::delivered;
        return ticket_status::failed;
    }
    /// Why it failed (disconnected: the partner is gone or the endpoint was
    /// closed; timed_out: not taken within the send bound); nullopt unless failed.
    std::optional<error> failure() const {
        int rc = zcio_ticket_status(t_.get());
        if (rc >= 0) return std::nullopt;
        return error(rc, "zcio_ticket_status", "the queued message was not delivered");
    }
    /// Wait until delivered, up to the endpoint's send bound: throws the
    /// failure's error, or timed_out if it is still pending then.
    void wait() {
        if (!until(ZCIO_TIMEOUT_DEFAULT)) throw error(-ETIMEDOUT, "zcio_ticket_wait", "still pending");
    }
    /// true: delivered; false: still pending. Throws the failure's error.
    bool try_wait() { return until(0); }
    template <class Rep, class Period> bool wait_for(std::chrono::duration<Rep, Period> d) {
        return until(detail::timeout_ms(d));
    }
    zcio_ticket *native_handle() const noexcept { return t_.get(); }

  private:
    friend class proxy_endpoint;
    explicit ticket(zcio_ticket *t) noexcept : t_(t) {}
    bool until(int ms) {
        int rc = zcio_ticket_wait(t_.get(), ms);
        if (rc == 0) return true;
        if (rc == -ETIMEDOUT || rc == -EAGAIN) {
            // Still pending, or failed with that code: the status tells.
            int st = zcio_ticket_status(t_.get());
            if (st == ZCIO_TICKET_PENDING) return false;
            if (st == ZCIO_TICKET_DELIVERED) return true;
            rc = st;
        }
        throw error(rc, "zcio_ticket_wait", "the queued message was not delivered");
    }
    detail::owned<zcio_ticket, detail::free_ticket> t_;
};

/// A receive under way (zcio_recv_handle, from proxy_endpoint::post or
/// call): collect its message with wait(). Destroying it withdraws it (a
/// message that filled it uncollected goes back to the endpoint's queue).
class recv_handle {
  public:
    recv_handle(recv_handle &&) noexcept = default;
    recv_handle &operator=(recv_handle &&) noexcept = default;

    /// Whether the message (or its error) is there (never waits).
    bool ready() const { return detail::check(zcio_recv_handle_ready(h_.get()), "zcio_recv_handle_ready") == 1; }
    /// The message, waiting up to the endpoint's receive bound.
    envelope wait() { return *get(ZCIO_TIMEOUT_DEFAULT); }
    std::optional<envelope> try_wait() { return get(0); }
    template <class Rep, class Period> std::optional<envelope> wait_for(std::chrono::duration<Rep, Period> d) {
        return get(detail::timeout_ms(d));
    }
    zcio_recv_handle *native_handle() const noexcept { return h_.get(); }

  private:
    friend class proxy_endpoint;
    explicit recv_handle(zcio_recv_handle *h) noexcept : h_(h) {}
    std::optional<envelope> get(int ms) {
        zcio_envelope out;
        int rc = zcio_recv_handle_wait(h_.get(), ms, &out);
        if (rc == 0) return envelope::received(out);
        if (detail::quiet(rc, ms)) return std::nullopt;
        detail::raise(rc, "zcio_recv_handle_wait");
    }
    detail::owned<zcio_recv_handle, detail::free_recv_handle> h_;
};

/// A rendezvous endpoint driven through proxy threads (zcio_proxy_endpoint):
/// send() queues and returns at once with a ticket; a proxy delivers the
/// queued messages in order. The partner speaks plain rendezvous. Destroying
/// it stops receiving; messages already queued are still delivered unless
/// close() was called. Thread-safe.
class proxy_endpoint {
  public:
    /// Take `ep` over, with the library's shared pool of proxy threads.
    explicit proxy_endpoint(rendezvous &&ep) : proxy_endpoint(std::move(ep), nullptr) {}
    /// Take `ep` over, with the threads of `pool` (ep's bounds stay: deliveries
    /// and ticket::wait wait up to its send bound, receives its receive bound).
    proxy_endpoint(rendezvous &&ep, const proxies &pool) : proxy_endpoint(std::move(ep), pool.native_handle()) {}
    proxy_endpoint(proxy_endpoint &&) noexcept = default;
    proxy_endpoint &operator=(proxy_endpoint &&) noexcept = default;

    /// This partner's quota (messages that may wait per direction).
    void set_quota(std::size_t quota) {
        detail::check(zcio_proxy_endpoint_set_quota(pe_.get(), quota), "zcio_proxy_endpoint_set_quota");
    }
    /// Queue `m` (its descriptors stay yours: the library sends duplicates);
    /// never waits. Throws would_block when the partner's queue holds its
    /// quota, disconnected when it is gone or this endpoint was closed.
    ticket send(const envelope &m) { return *queue(m, "zcio_proxy_endpoint_send"); }
    /// send(), or nullopt when the queue holds its quota.
    std::optional<ticket> try_send(const envelope &m) {
        zcio_ticket *t = nullptr;
        int rc = zcio_proxy_endpoint_send(pe_.get(), &m.e_, &t);
        if (rc == 0) return ticket(t);
        if (rc == -EAGAIN) return std::nullopt;
        detail::raise(rc, "zcio_proxy_endpoint_send");
    }
    /// Queue `m` and get a handle the partner's answer will be delivered to.
    recv_handle call(const envelope &m) {
        zcio_recv_handle *h = nullptr;
        detail::check(zcio_proxy_endpoint_call(pe_.get(), &m.e_, &h), "zcio_proxy_endpoint_call");
        return recv_handle(h);
    }
    /// Post a receive ahead: the next message goes to the handle (handles are
    /// served most recently posted first).
    recv_handle post() {
        zcio_recv_handle *h = nullptr;
        detail::check(zcio_proxy_endpoint_post(pe_.get(), &h), "zcio_proxy_endpoint_post");
        return recv_handle(h);
    }
    /// The next message, waiting up to the receive bound.
    envelope recv() { return *get(ZCIO_TIMEOUT_DEFAULT); }
    std::optional<envelope> try_recv() { return get(0); }
    template <class Rep, class Period> std::optional<envelope> recv_for(std::chrono::duration<Rep, Period> d) {
        return get(detail::timeout_ms(d));
    }
    peer_cred peer() const {
        peer_cred c{};
        detail::check(zcio_proxy_endpoint_peer(pe_.get(), &c), "zcio_proxy_endpoint_peer");
        return c;
    }
    proxy_endpoint_stats stats() const {
        proxy_endpoint_stats s{};
        detail::check(zcio_proxy_endpoint_get_stats(pe_.get(), &s, sizeof s), "zcio_proxy_endpoint_get_stats");
        return s;
    }
    /// Close now, keeping the handle: queued messages fail (their tickets:
    /// disconnected), new sends are refused, receiving stops.
    void close() { detail::check(zcio_proxy_endpoint_close(pe_.get()), "zcio_proxy_endpoint_close"); }
    zcio_proxy_endpoint *native_handle() const noexcept { return pe_.get(); }

  private:
    proxy_endpoint(rendezvous &&ep, const zcio_proxies *pool) {
        zcio_proxy_endpoint *pe = nullptr;
        detail::check(zcio_proxy_endpoint_new(ep.ep_.get(), pool, &pe), "zcio_proxy_endpoint_new");
        (void)ep.ep_.release(); // freed by the C call: the endpoint is pe's now
        pe_.reset(pe);
    }
    std::optional<ticket> queue(const envelope &m, const char *op) {
        zcio_ticket *t = nullptr;
        detail::check(zcio_proxy_endpoint_send(pe_.get(), &m.e_, &t), op);
        return ticket(t);
    }
    std::optional<envelope> get(int ms) {
        zcio_envelope out;
        int rc = zcio_proxy_endpoint_recv(pe_.get(), ms, &out);
        if (rc == 0) return envelope::received(out);
        if (detail::quiet(rc, ms)) return std::nullopt;
        detail::raise(rc, "zcio_proxy_endpoint_recv");
    }
    detail::owned<zcio_proxy_endpoint, detail::free_proxy_ep> pe_;
};

// ------------------------------------------------------------ the spin policy

/// How long a blocking wait spins before it sleeps, for the whole process
/// (zcio_spin_policy_*; Rust's zcio::SpinPolicy). Read when a channel, ring
/// end or rendezvous endpoint is made: set it before opening them.
struct spin_policy {
    /// What a blocking wait spins at most (default 500 µs; 0: sleep at once,
    /// right when more processes than CPUs share the work).
    std::chrono::microseconds max{500};
    /// What a wait inside an event loop's poll spins at most (default 50 µs,
    /// capped by max).
    std::chrono::microseconds task_max{50};

    /// The process's policy now.
    static spin_policy current() {
        std::uint64_t m = 0, t = 0;
        detail::check(zcio_spin_policy_get(&m, &t), "zcio_spin_policy_get");
        return spin_policy{std::chrono::microseconds(static_cast<std::int64_t>(std::min<std::uint64_t>(m, INT64_MAX))),
                           std::chrono::microseconds(static_cast<std::int64_t>(std::min<std::uint64_t>(t, INT64_MAX)))};
    }
    /// Make `p` the process's policy (negative durations count as 0).
    static void set(const spin_policy &p) {
        auto us = [](std::chrono::microseconds d) { return static_cast<std::uint64_t>(std::max<std::int64_t>(d.count(), 0)); };
        detail::check(zcio_spin_policy_set(us(p.max), us(p.task_max)), "zcio_spin_policy_set");
    }
};

// ---------------------------------------------------- buffering semantics

/// The eight buffering semantics (enum zcio_semantics; docs/semantics.md):
/// who owns a buffer after output or input, and what a later write affects.
enum class semantics : int {
    copy = ZCIO_SEM_COPY,
    emulated_copy = ZCIO_SEM_EMULATED_COPY,
    share = ZCIO_SEM_SHARE,
    emulated_share = ZCIO_SEM_EMULATED_SHARE,
    move = ZCIO_SEM_MOVE,
    emulated_move = ZCIO_SEM_EMULATED_MOVE,
    weak_move = ZCIO_SEM_WEAK_MOVE,
    emulated_weak_move = ZCIO_SEM_EMULATED_WEAK_MOVE,
};

/// The name of `s` ("emulated-copy", ...).
inline std::string_view name(semantics s) noexcept {
    const char *n = zcio_semantics_name(static_cast<int>(s));
    return n ? n : "";
}
/// The semantics named `n` (case and '_' for '-' do not matter); throws
/// invalid_input for an unknown name.
inline semantics parse_semantics(const std::string &n) {
    return static_cast<semantics>(detail::check(zcio_semantics_parse(n.c_str()), "zcio_semantics_parse"));
}

/// How an output travelled (enum zcio_delivery).
enum class delivery : int {
    copied = ZCIO_DELIVERY_COPIED,                 ///< into a system buffer
    write_protected = ZCIO_DELIVERY_PROTECTED,     ///< lent write-protected (TCOW)
    hidden = ZCIO_DELIVERY_HIDDEN,                 ///< lent hidden (emulated move)
    lent = ZCIO_DELIVERY_LENT,                     ///< lent unprotected (share, weak moves)
    sealed = ZCIO_DELIVERY_SEALED,                 ///< a sealed single-use region (move)
};

/// How an endpoint is set up (zcio_semantic_config).
struct semantic_config {
    semantics output = semantics::emulated_copy;
    semantics input = semantics::emulated_copy;
    /// Bytes of registered memory for arena buffers (0: 64 MiB).
    std::size_t arena_capacity = 0;
    /// How long the constructor waits for the peer's hello.
    std::chrono::milliseconds hello_timeout{10'000};
    /// Trust the peer before the hello (read semantic_endpoint::trust_peer first).
    bool trust_peer = false;
    /// Zero-copy mechanisms at every size, whatever the cost model says.
    bool ignore_cost_model = false;
    /// 0.0 - 1.0, or nullopt: the cost model's figure per size.
    std::optional<double> rewrite_tolerance;

    zcio_semantic_config to_c() const noexcept {
        zcio_semantic_config c;
        zcio_semantic_config_init(&c);
        c.output = static_cast<int>(output);
        c.input = static_cast<int>(input);
        c.arena_capacity = arena_capacity;
        c.hello_timeout_ms = detail::bound_ms(hello_timeout);
        c.trust_peer = trust_peer;
        c.ignore_cost_model = ignore_cost_model;
        c.rewrite_tolerance = rewrite_tolerance.value_or(-1.0);
        return c;
    }
};

/// How one input arrived: len, swapped_pages, copied, sender (a zcio_semantics value or -1).
using received = zcio_received;
/// Counters of an endpoint and its arena.
using semantic_stats = zcio_semantic_stats;

/// What the peer said in its hello.
struct peer_hello {
    semantics input;   ///< its input semantics
    bool trusts;       ///< it trusts this side (swaps lent pages in)
};

/// The layout of the next message (semantic_endpoint::next): allocate
/// arena_alloc(len, page_offset) and input into it to have whole pages swapped in.
struct input_layout {
    std::size_t len;
    std::size_t page_offset;
};

namespace detail {
inline void free_sem_ep(zcio_semantic_endpoint *e) { zcio_semantic_endpoint_close(e); }
inline void free_arena_buf(zcio_arena_buf *b) { zcio_arena_buf_free(b); }
inline void free_owned(zcio_owned *b) { zcio_semantic_endpoint_free(nullptr, b); }
inline void free_cost_model(zcio_cost_model *m) { zcio_cost_model_free(m); }
inline int sem_arg(std::optional<semantics> s) noexcept { return s ? static_cast<int>(*s) : -1; }
} // namespace detail

/// A buffer in an endpoint's arena (zcio_arena_buf): the only memory output
/// lends and input swaps pages into. Stays valid after its endpoint is gone;
/// destroyed: freed (pages the peer still reads stay with it until returned).
class arena_buffer {
  public:
    arena_buffer(arena_buffer &&) noexcept = default;
    arena_buffer &operator=(arena_buffer &&) noexcept = default;
    /// The bytes, writable at any time (a write to a page in flight gets a
    /// private copy of it: TCOW).
    std::span<std::byte> bytes() noexcept {
        return {static_cast<std::byte *>(zcio_arena_buf_data(b_.get())), zcio_arena_buf_len(b_.get())};
    }
    std::size_t size() const noexcept { return zcio_arena_buf_len(b_.get()); }
    zcio_arena_buf *native_handle() const noexcept { return b_.get(); }

  private:
    friend class semantic_endpoint;
    explicit arena_buffer(zcio_arena_buf *b) noexcept : b_(b) {}
    detail::owned<zcio_arena_buf, detail::free_arena_buf> b_;
};

/// A system-allocated buffer (zcio_owned): semantic_endpoint::alloc fills one
/// for output_owned, input_owned returns one. Destroyed: freed (give it back
/// with semantic_endpoint::free to have it cached for reuse).
class owned_buffer {
  public:
    owned_buffer(owned_buffer &&) noexcept = default;
    owned_buffer &operator=(owned_buffer &&) noexcept = default;
    /// The bytes, writable while the buffer is yours.
    std::span<std::byte> bytes() noexcept {
        return {static_cast<std::byte *>(zcio_owned_data(b_.get())), zcio_owned_len(b_.get())};
    }
    std::size_t size() const noexcept { return zcio_owned_len(b_.get()); }
    zcio_owned *native_handle() const noexcept { return b_.get(); }

  private:
    friend class semantic_endpoint;
    explicit owned_buffer(zcio_owned *b) noexcept : b_(b) {}
    detail::owned<zcio_owned, detail::free_owned> b_;
};

/// A channel with buffering semantics (zcio_semantic_endpoint; Rust's
/// semantics::SemanticEndpoint): output/input under copy, emulated copy,
/// share, emulated share; alloc/output_owned/input_owned under the move
/// family. Both ends of a channel make one (they exchange a hello).
/// Destroyed: closed with its channel (the peer sees disconnected).
class semantic_endpoint {
  public:
    /// Take `ch` over and exchange hellos (waits up to config.hello_timeout).
    /// After an invalid_input error the channel is still in `ch`; after any
    /// other error it is closed.
    explicit semantic_endpoint(channel &&ch, const semantic_config &config = {}) {
        zcio_semantic_config c = config.to_c();
        zcio_semantic_endpoint *e = nullptr;
        int rc = zcio_semantic_endpoint_new(ch.native_handle(), &c, &e);
        if (rc != -EINVAL) (void)ch.ch_.release(); // the endpoint's now (or closed)
        detail::check(rc, "zcio_semantic_endpoint_new");
        ep_.reset(e);
    }
    semantic_endpoint(semantic_endpoint &&) noexcept = default;
    semantic_endpoint &operator=(semantic_endpoint &&) noexcept = default;

    /// Output `data` under `sem` (nullopt: the endpoint's output semantics),
    /// shaped like write. Only arena_buffer bytes can be lent; other memory is copied.
    delivery output(std::span<const std::byte> data, std::optional<semantics> sem = std::nullopt) {
        return static_cast<delivery>(detail::check(
            zcio_semantic_endpoint_output(ep_.get(), data.data(), data.size(), detail::sem_arg(sem)),
            "zcio_semantic_endpoint_output"));
    }
    /// Input the next message into `buf` (the whole message or nothing),
    /// waiting up to the channel's receive bound. A too-short buffer throws
    /// error_kind::too_large (next() tells the length first).
    received input(std::span<std::byte> buf, std::optional<semantics> sem = std::nullopt) {
        received r{};
        detail::check(zcio_semantic_endpoint_input(ep_.get(), buf.data(), buf.size(), detail::sem_arg(sem), &r),
                      "zcio_semantic_endpoint_input");
        return r;
    }
    /// The layout of the next message without taking it, waiting up to the
    /// channel's receive bound.
    input_layout next() { return *layout(ZCIO_TIMEOUT_DEFAULT); }
    std::optional<input_layout> try_next() { return layout(0); }
    template <class Rep, class Period> std::optional<input_layout> next_for(std::chrono::duration<Rep, Period> d) {
        return layout(detail::timeout_ms(d));
    }

    /// A buffer of `len` bytes in the arena, `page_offset` bytes into its
    /// first page. Throws would_block when the arena is full now.
    arena_buffer arena_alloc(std::size_t len, std::size_t page_offset = 0) {
        zcio_arena_buf *b = nullptr;
        detail::check(zcio_arena_alloc(ep_.get(), len, page_offset, &b), "zcio_arena_alloc");
        return arena_buffer(b);
    }
    /// A system-allocated buffer for the output semantics (move family).
    owned_buffer alloc(std::size_t len) {
        zcio_owned *b = nullptr;
        detail::check(zcio_semantic_endpoint_alloc(ep_.get(), len, &b), "zcio_semantic_endpoint_alloc");
        return owned_buffer(b);
    }
    /// Hand `buf` over. On failure it stays in `buf` when it could be given
    /// back, and is gone when not (a move buffer is sealed before sending).
    delivery output_owned(owned_buffer &&buf, std::optional<semantics> sem = std::nullopt) {
        zcio_owned *p = buf.b_.get();
        int rc = zcio_semantic_endpoint_output_owned(ep_.get(), &p, detail::sem_arg(sem));
        if (p == nullptr) (void)buf.b_.release(); // consumed
        return static_cast<delivery>(detail::check(rc, "zcio_semantic_endpoint_output_owned"));
    }
    /// The next message in a system-allocated buffer, waiting as input().
    owned_buffer input_owned(std::optional<semantics> sem = std::nullopt) {
        zcio_owned *b = nullptr;
        detail::check(zcio_semantic_endpoint_input_owned(ep_.get(), detail::sem_arg(sem), &b),
                      "zcio_semantic_endpoint_input_owned");
        return owned_buffer(b);
    }
    /// Give a system-allocated buffer back to be cached for reuse.
    void free(owned_buffer &&buf) noexcept { zcio_semantic_endpoint_free(ep_.get(), buf.b_.release()); }

    /// What the peer said in its hello.
    peer_hello peer() const {
        int input = 0, trusts = 0;
        detail::check(zcio_semantic_endpoint_peer(ep_.get(), &input, &trusts), "zcio_semantic_endpoint_peer");
        return peer_hello{static_cast<semantics>(input), trusts != 0};
    }
    /// The fraction of a `bytes`-long buffer's pages that may have been
    /// rewritten during its previous emulated-copy output for it to be lent again.
    double rewrite_tolerance(std::size_t bytes) const {
        double v = 0;
        detail::check(zcio_semantic_endpoint_rewrite_tolerance(ep_.get(), bytes, &v),
                      "zcio_semantic_endpoint_rewrite_tolerance");
        return v;
    }
    semantic_stats stats() const {
        semantic_stats s{};
        detail::check(zcio_semantic_endpoint_get_stats(ep_.get(), &s), "zcio_semantic_endpoint_get_stats");
        return s;
    }
    /// Declare that the peer never writes pages it lent (unsafe opt-in, see
    /// zcio_semantic_endpoint_trust_peer): a peer that does can then change
    /// bytes you already received. Prefer semantic_config::trust_peer.
    void trust_peer() { detail::check(zcio_semantic_endpoint_trust_peer(ep_.get()), "zcio_semantic_endpoint_trust_peer"); }
    zcio_semantic_endpoint *native_handle() const noexcept { return ep_.get(); }

  private:
    std::optional<input_layout> layout(int ms) {
        input_layout l{};
        int rc = zcio_semantic_endpoint_next(ep_.get(), ms, &l.len, &l.page_offset);
        if (rc == 0) return l;
        if (detail::quiet(rc, ms)) return std::nullopt;
        detail::raise(rc, "zcio_semantic_endpoint_next");
    }
    detail::owned<zcio_semantic_endpoint, detail::free_sem_ep> ep_;
};

/// The cost model (zcio_cost_model; Rust's semantics::cost::CostModel): what
/// each primitive operation costs on this machine, from which endpoints
/// choose their mechanisms per size. Immutable.
class cost_model {
  public:
    /// The model endpoints made now decide with (the calibration file's, read
    /// once per process, else the built-in defaults).
    static cost_model current() { return make(zcio_cost_model_current, "zcio_cost_model_current"); }
    static cost_model builtin() { return make(zcio_cost_model_builtin, "zcio_cost_model_builtin"); }
    /// Read and check a calibration file (not_found, protocol: not usable).
    static cost_model load(const std::string &path) {
        zcio_cost_model *m = nullptr;
        detail::check(zcio_cost_model_load(path.c_str(), &m), "zcio_cost_model_load");
        return cost_model(m);
    }
    static cost_model from_json(const std::string &json) {
        zcio_cost_model *m = nullptr;
        detail::check(zcio_cost_model_from_json(json.c_str(), &m), "zcio_cost_model_from_json");
        return cost_model(m);
    }
    /// Measure this machine (zcio_calibrate_measure): quick is bounded to
    /// well under a second idle (20 s at most), the full set to 2 minutes.
    static cost_model calibrate(bool quick = true) {
        zcio_cost_model *m = nullptr;
        detail::check(zcio_calibrate_measure(quick, &m), "zcio_calibrate_measure");
        return cost_model(m);
    }
    cost_model(cost_model &&) noexcept = default;
    cost_model &operator=(cost_model &&) noexcept = default;

    std::string to_json() const {
        long n = detail::check(static_cast<long>(zcio_cost_model_to_json(m_.get(), nullptr, 0)), "zcio_cost_model_to_json");
        std::string s(static_cast<std::size_t>(n) + 1, '\0');
        detail::check(static_cast<long>(zcio_cost_model_to_json(m_.get(), s.data(), s.size())), "zcio_cost_model_to_json");
        s.resize(static_cast<std::size_t>(n));
        return s;
    }
    void save(const std::string &path) const {
        detail::check(zcio_cost_model_save(m_.get(), path.c_str()), "zcio_cost_model_save");
    }
    /// "builtin", "file" or "measured".
    std::string_view source() const noexcept {
        const char *s = zcio_cost_model_source(m_.get());
        return s ? s : "";
    }
    /// Nanoseconds of primitive operation `op` ("copy_in", "ref_pass", ...) on `bytes`.
    double cost(const std::string &op, std::size_t bytes) const {
        double ns = 0;
        detail::check(zcio_cost_model_cost(m_.get(), op.c_str(), bytes, &ns), "zcio_cost_model_cost");
        return ns;
    }
    /// Nanoseconds of one transfer of `bytes` under `s` end to end.
    double predict(semantics s, std::size_t bytes, bool aligned = true) const {
        double ns = 0;
        detail::check(zcio_cost_model_predict(m_.get(), static_cast<int>(s), bytes, aligned, &ns),
                      "zcio_cost_model_predict");
        return ns;
    }
    zcio_cost_model *native_handle() const noexcept { return m_.get(); }

  private:
    explicit cost_model(zcio_cost_model *m) noexcept : m_(m) {}
    static cost_model make(int (*f)(zcio_cost_model **), const char *op) {
        zcio_cost_model *m = nullptr;
        detail::check(f(&m), op);
        return cost_model(m);
    }
    detail::owned<zcio_cost_model, detail::free_cost_model> m_;
};

/// Where the calibration file is ($ZCIO_CALIBRATION, else
/// $XDG_CONFIG_HOME/zcio/calibration.json, else ~/.config/zcio/calibration.json);
/// nullopt when none of these is set.
inline std::optional<std::string> calibration_path() {
    long n = zcio_calibration_path(nullptr, 0);
    if (n == -ENOENT) return std::nullopt;
    detail::check(n, "zcio_calibration_path");
    std::string s(static_cast<std::size_t>(n) + 1, '\0');
    detail::check(static_cast<long>(zcio_calibration_path(s.data(), s.size())), "zcio_calibration_path");
    s.resize(static_cast<std::size_t>(n));
    return s;
}
// ------------------------------------------------------------ associations

/// An increment of zcio_assoc_run / start: zcio chooses (4 MiB).
inline constexpr std::uint64_t increment_default = ZCIO_INCREMENT_DEFAULT;
/// An increment until the source ends (or an error, or stop()).
inline constexpr std::uint64_t increment_infinite = ZCIO_INCREMENT_INFINITE;

/// The end of one increment (moved, eof, stopped, error: 0 or the code of
/// the error that ended it after some bytes moved).
using completion = zcio_completion;
/// An association's status (zcio_assoc_status); the labels are
/// association::source_label() / sink_label().
using association_status = zcio_assoc_status;
/// An association's live counters (zcio_assoc_stats).
using association_stats = zcio_assoc_stats;
/// The name of mover `mover` (association_status::mover, ZCIO_MOVER_...):
/// "copy_file_range", "sendfile", "splice", "buffer" or "unknown" (zcio_mover_name).
inline std::string_view mover_name(int mover) noexcept { return zcio_mover_name(mover); }

namespace detail {
inline void free_assoc(zcio_assoc *a) { zcio_assoc_close(a, nullptr); }
/// A reply of a zcio_*(…, buf, cap) call that returns the full length:
/// `call(buf, cap)`, again with room for all of it if it did not fit.
template <class F> inline std::string text(F call, const char *op) {
    std::string s(256, '\0');
    auto n = static_cast<std::size_t>(detail::check(call(s.data(), s.size() + 1), op));
    if (n > s.size()) {
        s.assign(n, '\0');
        n = static_cast<std::size_t>(detail::check(call(s.data(), s.size() + 1), op));
    }
    s.resize(std::min(n, s.size()));
    return s;
}
} // namespace detail

/// A standing association between a source and a sink (zcio_assoc): the
/// library moves the data, through the kernel's fast paths or through a
/// stack of processing modules. Made by zcio::splice; closed (flow stopped,
/// both ends closed) when destroyed. Callbacks run on the association's
/// worker thread; an exception from one is rethrown by the next run(),
/// wait(), try_wait() or wait_for() (a completion callback's also stops flow).
class association {
  public:
    association(association &&) noexcept = default;
    /// Closes the association this one held first (its worker may still
    /// call the callbacks), then takes `o`'s.
    association &operator=(association &&o) noexcept {
        if (this != &o) {
            a_ = std::move(o.a_);
            cb_ = std::move(o.cb_);
        }
        return *this;
    }
    ~association() = default; // a_ (declared last) closes before cb_ goes

    /// The descriptors src_fd and dst_fd (both duplicated: you keep yours).
    static association fds(int src_fd, int dst_fd) {
        zcio_assoc *a = nullptr;
        detail::check(zcio_splice_fds(src_fd, dst_fd, &a), "zcio_splice_fds");
        return association(a);
    }
    /// The I/O objects the specs name (a path, "-", "fd:N", "tcp:HOST:PORT",
    /// "tcp-listen:HOST:PORT", "udp:HOST:PORT", "unix:PATH", "ring:NAME").
    static association specs(const std::string &src, const std::string &dst) {
        zcio_assoc *a = nullptr;
        detail::check(zcio_splice_specs(src.c_str(), dst.c_str(), &a), "zcio_splice_specs");
        return association(a);
    }
    /// The channel's messages into dst_fd; the channel is the association's
    /// (also when this throws).
    static association from_channel(channel &&src, int dst_fd) {
        zcio_assoc *a = nullptr;
        int rc = zcio_splice_channel_fd(src.ch_.release(), dst_fd, &a);
        detail::check(rc, "zcio_splice_channel_fd");
        return association(a);
    }
    /// src_fd's data into the channel, one message per block, by reference;
    /// the channel is the association's (also when this throws).
    static association to_channel(int src_fd, channel &&dst) {
        zcio_assoc *a = nullptr;
        int rc = zcio_splice_fd_channel(src_fd, dst.ch_.release(), &a);
        detail::check(rc, "zcio_splice_fd_channel");
        return association(a);
    }

    /// Synchronous mode: move `bytes` (a count, increment_default or
    /// increment_infinite) and block until moved, the source ends, an error
    /// or stop() from another thread. An error after some bytes moved is in
    /// the completion's `error`; one before any moved throws.
    completion run(std::uint64_t bytes = increment_infinite) {
        completion c{};
        int rc = zcio_assoc_run(a_.get(), bytes, &c);
        rethrow();
        detail::check(rc, "zcio_assoc_run");
        return c;
    }
    /// Asynchronous mode: start `bytes` on the worker thread and return.
    void start(std::uint64_t bytes = increment_infinite) {
        detail::check(zcio_assoc_start(a_.get(), bytes), "zcio_assoc_start");
    }
    /// The next asynchronous completion, waiting up to the bound (one hour).
    completion wait() { return *get(-1); }
    std::optional<completion> try_wait() { return get(0); }
    template <class Rep, class Period> std::optional<completion> wait_for(std::chrono::duration<Rep, Period> d) {
        return get(detail::timeout_ms(d));
    }
    /// Readable while a completion waits (for poll/epoll).
    int fd() const { return detail::check(zcio_assoc_fd(a_.get()), "zcio_assoc_fd"); }

    /// Called on the worker when an asynchronous increment ends: return the
    /// next increment to start it at once, std::nullopt to stop. An empty
    /// function removes the callback. Between increments only.
    void on_complete(std::function<std::optional<std::uint64_t>(const completion &)> f) {
        if (!cb_) detail::raise(-EINVAL, "zcio_assoc_on_complete");
        std::lock_guard<std::recursive_mutex> g(cb_->m);
        bool set = static_cast<bool>(f);
        detail::check(zcio_assoc_on_complete(a_.get(), set ? &complete_tramp : nullptr, set ? cb_.get() : nullptr),
                      "zcio_assoc_on_complete");
        cb_->complete = std::move(f);
    }
    /// The quench hook: f(true) when the sink stops taking data at once,
    /// f(false) when it takes data again (buffer path). Between increments.
    void on_quench(std::function<void(bool)> f) {
        if (!cb_) detail::raise(-EINVAL, "zcio_assoc_on_quench");
        std::lock_guard<std::recursive_mutex> g(cb_->m);
        bool set = static_cast<bool>(f);
        detail::check(zcio_assoc_on_quench(a_.get(), set ? &quench_tramp : nullptr, set ? cb_.get() : nullptr),
                      "zcio_assoc_on_quench");
        cb_->quench = std::move(f);
    }
    void set_drop_when_behind(bool on) {
        detail::check(zcio_assoc_set_drop_when_behind(a_.get(), on ? 1 : 0), "zcio_assoc_set_drop_when_behind");
    }
    /// Stop flow (any thread).
    void stop() { detail::check(zcio_assoc_stop(a_.get()), "zcio_assoc_stop"); }
    association_status status() const {
        association_status s{};
        detail::check(zcio_assoc_get_status(a_.get(), &s), "zcio_assoc_get_status");
        return s;
    }
    association_stats stats() const {
        association_stats s{};
        detail::check(zcio_assoc_get_stats(a_.get(), &s, sizeof s), "zcio_assoc_get_stats");
        return s;
    }
    /// The source's and sink's labels (the spec, "fd:N" or "channel").
    std::string source_label() const { return label(ZCIO_ASSOC_SOURCE); }
    std::string sink_label() const { return label(ZCIO_ASSOC_SINK); }

    /// Push a module (a spec: "zstd:level=3") at the sink end of the stack.
    void push(const std::string &spec) { detail::check(zcio_assoc_push(a_.get(), spec.c_str()), "zcio_assoc_push"); }
    /// Pop the module at the sink end (flushed first); false: none stacked.
    bool pop() { return detail::check(zcio_assoc_pop(a_.get()), "zcio_assoc_pop") == 1; }
    /// End the stream here: the modules flush what they hold to the sink.
    void finish() { detail::check(zcio_assoc_finish(a_.get()), "zcio_assoc_finish"); }
    /// A module's control: `which` is its position ("0", …) or name; no
    /// value reads `key`. The reply's text.
    std::string control(const std::string &which, const std::string &key,
                        const std::optional<std::string> &value = std::nullopt) {
        // Asked once: a write must not be repeated to learn the reply's length.
        std::string s(65536, '\0');
        auto n = static_cast<std::size_t>(
            detail::check(zcio_assoc_control(a_.get(), which.c_str(), key.c_str(), value ? value->c_str() : nullptr,
                                             s.data(), s.size() + 1),
                          "zcio_assoc_control"));
        s.resize(std::min(n, s.size()));
        return s;
    }
    /// Every module's counters, one line each: "NAME key=value …\n".
    std::string module_stats() const {
        return detail::text([&](char *b, std::size_t c) { return zcio_assoc_module_stats(a_.get(), b, c); },
                            "zcio_assoc_module_stats");
    }
    /// Stop flow, close both ends; the final status. The handle is empty after.
    association_status close() {
        association_status s{};
        zcio_assoc_close(a_.release(), &s);
        return s;
    }
    zcio_assoc *native_handle() const noexcept { return a_.get(); }

  private:
    /// The callbacks, at a stable address the C calls get as their ctx.
    struct callbacks {
        std::recursive_mutex m; // a callback may call on_complete (and get busy)
        std::function<std::optional<std::uint64_t>(const completion &)> complete;
        std::function<void(bool)> quench;
        std::exception_ptr thrown;
        void keep(std::exception_ptr e) {
            if (!thrown) thrown = std::move(e);
        }
    };
    explicit association(zcio_assoc *a) : cb_(std::make_unique<callbacks>()), a_(a) {}
    static int complete_tramp(void *ctx, const zcio_completion *c, std::uint64_t *next) noexcept {
        auto *cb = static_cast<callbacks *>(ctx);
        std::lock_guard<std::recursive_mutex> g(cb->m);
        try {
            if (!cb->complete) return 0;
            auto n = cb->complete(*c);
            if (!n) return 0;
            *next = *n;
            return 1;
        } catch (...) {
            cb->keep(std::current_exception());
            return 0;
        }
    }
    static void quench_tramp(void *ctx, int quenched) noexcept {
        auto *cb = static_cast<callbacks *>(ctx);
        std::lock_guard<std::recursive_mutex> g(cb->m);
        try {
            if (cb->quench) cb->quench(quenched != 0);
        } catch (...) {
            cb->keep(std::current_exception()); // flow goes on
        }
    }
    std::string label(int which) const {
        return detail::text([&](char *b, std::size_t c) { return zcio_assoc_label(a_.get(), which, b, c); },
                            "zcio_assoc_label");
    }
    std::optional<completion> get(int ms) {
        completion c{};
        int rc = zcio_assoc_wait(a_.get(), ms, &c);
        rethrow();
        if (rc == 0) return c;
        if (detail::quiet(rc, ms)) return std::nullopt;
        detail::raise(rc, "zcio_assoc_wait");
    }
    void rethrow() {
        if (!cb_) return;
        std::exception_ptr e;
        {
            std::lock_guard<std::recursive_mutex> g(cb_->m);
            e = std::exchange(cb_->thrown, nullptr);
        }
        if (e) std::rethrow_exception(e);
    }
    // Destroyed in reverse order: the association (its worker) before the
    // callbacks it calls.
    std::unique_ptr<callbacks> cb_;
    detail::owned<zcio_assoc, detail::free_assoc> a_;
};

/// Associate two descriptors (duplicated: you keep yours).
inline association splice(int src_fd, int dst_fd) { return association::fds(src_fd, dst_fd); }
/// Associate the I/O objects two specs name.
inline association splice(const std::string &src, const std::string &dst) { return association::specs(src, dst); }
/// A channel's messages into a descriptor (the channel is taken over).
inline association splice(channel &&src, int dst_fd) { return association::from_channel(std::move(src), dst_fd); }
/// A descriptor's data into a channel (the channel is taken over).
inline association splice(int src_fd, channel &&dst) { return association::to_channel(src_fd, std::move(dst)); }

/// zcio_cp: copy src to dst through `modules` until the source ends; the final status.
inline association_status cp(const std::string &src, const std::string &dst,
                             std::initializer_list<std::string_view> modules = {}) {
    std::vector<std::string> keep(modules.begin(), modules.end());
    std::vector<const char *> ptrs;
    for (auto &m : keep) ptrs.push_back(m.c_str());
    association_status s{};
    detail::check(zcio_cp(src.c_str(), dst.c_str(), ptrs.data(), ptrs.size(), &s), "zcio_cp");
    return s;
}
/// zcio_module_load: load a C-ABI module (zcio_module.h) you trust; its name.
inline std::string load_module(const std::string &path) {
    std::string name(4096, '\0'); // asked once: loading twice would load twice
    auto n = static_cast<std::size_t>(
        detail::check(zcio_module_load(path.c_str(), name.data(), name.size() + 1), "zcio_module_load"));
    name.resize(std::min(n, name.size()));
    return name;
}
/// zcio_module_names: the modules push and cp can open, sorted.
inline std::vector<std::string> module_names() {
    std::string all =
        detail::text([](char *b, std::size_t c) { return zcio_module_names(b, c); }, "zcio_module_names");
    std::vector<std::string> names;
    for (std::size_t at = 0; at < all.size();) {
        std::size_t nl = all.find('\n', at);
        if (nl == std::string::npos) nl = all.size();
        if (nl > at) names.emplace_back(all, at, nl - at);
        at = nl + 1;
    }
    return names;
}

#ifdef ZCIO_BRIDGE
// ------------------------------------------------------------------ bridge

/// How a bridge connects (its Zenoh session) and runs (struct
/// zcio_bridge_session; zcio_bridge_session_init's defaults where a field
/// here is left as it is). Converted for the start call only.
struct bridge_session {
    std::vector<std::string> listen;  // endpoints to listen on ("tcp/127.0.0.1:0": a free port)
    std::vector<std::string> connect; // endpoints to connect to ("tcp/10.0.0.2:7447")
    std::string config_file;          // a Zenoh configuration file (JSON5), "" for none
    bool scout = false;               // allow multicast scouting (default: name the peers)
    bool no_wait = false;             // export: read the source at once, not at a first subscriber
    bool copy = false;                // export: copy every ring block out before publishing it
    bool from_oldest = false;         // export: start at the oldest block the ring holds
    std::size_t history = 0;          // export: samples kept for late importers; import: ask for them
    std::size_t max_sample = 0;       // largest sample in bytes (0: the default, 64 MiB)
    std::chrono::milliseconds grace{1000}; // import: wait for more once the exporter's token is gone
    std::chrono::milliseconds connect_timeout = forever; // import: fail (timed_out) with no peer by then
    bool keep = false;                // import: keep a ring sink it created when it ends
    std::optional<ring_options> ring; // import into a missing ring: how to create it (default: 16 MiB blocks)
};

/// The live counters of a bridge (zcio_bridge_get_counters).
using bridge_counters = zcio_bridge_counters;

/// How a bridge ended (bridge::wait): the stream's end, a stop(), or a
/// failure (the error it ended with: disconnected when the producer died or
/// the exporter vanished, producer_failed, timed_out with no peer).
struct bridge_status {
    enum class how { end_of_stream, stopped, failed };
    how ended;
    int code; // ZCIO_BRIDGE_END_OF_STREAM, ZCIO_BRIDGE_STOPPED, or the negative code
    std::string detail; // zcio_last_error() of a failure
    bool ok() const noexcept { return ended == how::end_of_stream; }
    error_kind kind() const noexcept { return kind_of(code); } // of a failure
};

namespace detail {
inline void free_bridge(zcio_bridge *b) { zcio_bridge_close(b); }
} // namespace detail

/// A running Zenoh bridge (zcio_bridge): a ring or listener exported to a
/// Zenoh key, or a key imported into a ring or channel, on a thread of its
/// own. Destroying it stops it and waits for its thread (zcio_bridge_close).
/// Thread-safe. Needs a library built with the bridge (ZCIO_BRIDGE).
class bridge {
  public:
    /// zcio_bridge_export_start: export `source` ("ring:NAME" or
    /// "listen:PATH") to `key` (no wildcards). Returns once the source is
    /// open and the publisher declared.
    static bridge export_start(const std::string &source, const std::string &key,
                               const bridge_session &session = {}) {
        return start(true, source, key, session);
    }
    /// zcio_bridge_import_start: import `key` (wildcards allowed) into `sink`
    /// ("ring:NAME" or "connect:PATH"). Returns once the sink is open and
    /// the subscriptions declared.
    static bridge import_start(const std::string &key, const std::string &sink,
                               const bridge_session &session = {}) {
        return start(false, key, sink, session);
    }
    bridge(bridge &&) noexcept = default;
    bridge &operator=(bridge &&) noexcept = default;

    /// The endpoints its session listens on, a port 0 resolved ("tcp/127.0.0.1:40123").
    std::vector<std::string> endpoints() const {
        std::string all = text_of();
        std::vector<std::string> eps;
        for (std::size_t at = 0; at < all.size();) {
            std::size_t sp = all.find(' ', at);
            if (sp == std::string::npos) sp = all.size();
            if (sp > at) eps.emplace_back(all, at, sp - at);
            at = sp + 1;
        }
        return eps;
    }
    bridge_counters counters() const {
        bridge_counters c{};
        detail::check(zcio_bridge_get_counters(b_.get(), &c, sizeof c), "zcio_bridge_get_counters");
        return c;
    }
    /// Ask it to stop (returns at once; wait for the end). An import closes
    /// its ring with an error: its readers see the stream cut.
    void stop() { detail::check(zcio_bridge_stop(b_.get()), "zcio_bridge_stop"); }
    /// Wait as long as it runs (a bridge ends with its stream, a stop() or a failure).
    bridge_status wait() { return *get(ZCIO_TIMEOUT_INFINITE); }
    std::optional<bridge_status> try_wait() { return get(0); }
    template <class Rep, class Period> std::optional<bridge_status> wait_for(std::chrono::duration<Rep, Period> d) {
        return get(detail::timeout_ms(d));
    }
    zcio_bridge *native_handle() const noexcept { return b_.get(); }

  private:
    explicit bridge(zcio_bridge *b) noexcept : b_(b) {}
    static bridge start(bool exp, const std::string &a, const std::string &b, const bridge_session &s) {
        zcio_bridge_session c{};
        detail::check(zcio_bridge_session_init(&c, sizeof c), "zcio_bridge_session_init");
        std::vector<const char *> listen, connect;
        for (auto &e : s.listen) listen.push_back(e.c_str());
        for (auto &e : s.connect) connect.push_back(e.c_str());
        c.listen = listen.data();
        c.n_listen = listen.size();
        c.connect = connect.data();
        c.n_connect = connect.size();
        c.config_file = s.config_file.empty() ? nullptr : s.config_file.c_str();
        c.scout = s.scout;
        c.no_wait = s.no_wait;
        c.copy = s.copy;
        c.from_oldest = s.from_oldest;
        c.history = s.history;
        if (s.max_sample) c.max_sample = s.max_sample;
        c.grace_ms = s.grace < s.grace.zero() ? -1 : detail::timeout_ms(s.grace);
        c.connect_timeout_ms = s.connect_timeout == forever ? ZCIO_TIMEOUT_INFINITE
                               : s.connect_timeout <= s.connect_timeout.zero()
                                   ? 0
                                   : detail::timeout_ms(s.connect_timeout);
        c.keep = s.keep;
        zcio_ring_options ro{};
        if (s.ring) {
            ro = s.ring->native();
            c.ring_options = &ro;
            c.ring_options_size = sizeof ro;
        }
        zcio_bridge *h = nullptr;
        if (exp)
            detail::check(zcio_bridge_export_start(a.c_str(), b.c_str(), &c, sizeof c, &h),
                          "zcio_bridge_export_start");
        else
            detail::check(zcio_bridge_import_start(a.c_str(), b.c_str(), &c, sizeof c, &h),
                          "zcio_bridge_import_start");
        return bridge(h);
    }
    std::string text_of() const {
        return detail::text([this](char *buf, std::size_t n) { return zcio_bridge_endpoints(b_.get(), buf, n); },
                            "zcio_bridge_endpoints");
    }
    std::optional<bridge_status> get(int ms) {
        int st = 0;
        int rc = zcio_bridge_wait(b_.get(), ms, &st);
        if (rc == -ETIMEDOUT || rc == -EAGAIN) return std::nullopt;
        detail::check(rc, "zcio_bridge_wait");
        if (st == ZCIO_BRIDGE_END_OF_STREAM) return bridge_status{bridge_status::how::end_of_stream, st, {}};
        if (st == ZCIO_BRIDGE_STOPPED) return bridge_status{bridge_status::how::stopped, st, {}};
        return bridge_status{bridge_status::how::failed, st, zcio_last_error()};
    }
    detail::owned<zcio_bridge, detail::free_bridge> b_;
};
#endif // ZCIO_BRIDGE

} // namespace zcio

