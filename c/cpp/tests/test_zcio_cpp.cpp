// Tests of the C++ API (include/zcio.hpp) across real processes.
//
// Each test runs in a forked child under a watchdog (alarm), so a hang or a
// crash fails that test only; peers are forked from the test and waited for
// with a bound. Sockets and rings live in a fresh directory (ZCIO_RING_DIR).
//
//   test_zcio_cpp [TEST...]        (no argument: every test)
#include "harness.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {

std::string path(const std::string &name) { return work_dir + "/" + name; }
std::string unique(const char *what) { return std::string(what) + "-" + std::to_string(getpid()); }

std::span<const std::byte> as_bytes(const std::string &s) { return std::as_bytes(std::span(s)); }
std::string as_string(std::span<const std::byte> b) {
    return std::string(reinterpret_cast<const char *>(b.data()), b.size());
}
/// A private copy of a received message as a string.
std::string copy_of(const zcio::message &m) {
    auto v = m.to_vector();
    return std::string(reinterpret_cast<const char *>(v.data()), v.size());
}
void fill(zcio::buffer &b, const std::string &s) {
    CHECK(b.size() >= s.size());
    std::memcpy(b.data().data(), s.data(), s.size());
    b.truncate(s.size());
}

int open_fds() {
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    while (readdir(d)) n++;
    closedir(d);
    return n;
}

// ----------------------------------------------------------------- tests

void channel_round_trip() {
    auto sock = path("rt.sock");
    auto l = zcio::listener::bind(sock);
    pid_t peer = spawn([&] {
        auto ch = zcio::channel::connect(sock);
        zcio::pool pool("cpp-test", 1 << 20, 4);
        // One slice: reserve -> fill -> freeze -> send.
        auto b = pool.alloc(4096);
        fill(b, "hello from c++");
        ch.send(std::move(b).freeze());
        // Two slices: a header and a payload as one message.
        auto h = pool.alloc(16), p = pool.alloc(64);
        fill(h, "header");
        fill(p, "payload bytes");
        auto m = std::move(h).freeze();
        m.append(std::move(p).freeze());
        CHECK(m.slice_count() == 2 && m.size() == 6 + 13);
        ch.send(std::move(m));
        // A copy into the channel's own pool.
        ch.send_copy(as_bytes("copied"));
        // The parent forwards the first message back by reference.
        auto back = ch.recv();
        CHECK(back.is_received());
        CHECK(copy_of(back) == "hello from c++");
        auto st = ch.stats();
        CHECK(st.msgs_sent == 3 && st.msgs_received == 1);
    });
    auto ch = l.accept_for(30s);
    CHECK(ch.has_value());
    auto m1 = ch->recv();
    CHECK(m1.slice_count() == 1);
    CHECK(as_string(m1.bytes()) == "hello from c++");
    auto m2 = ch->recv();
    CHECK(m2.slice_count() == 2);
    auto sl = m2.slices();
    CHECK(as_string(sl[0]) == "header" && as_string(sl[1]) == "payload bytes");
    CHECK(copy_of(m2) == "headerpayload bytes");
    CHECK_THROWS_KIND(m2.bytes(), zcio::error_kind::invalid_input);
    std::array<std::byte, 7> part{};
    CHECK(m2.read(3, part) == 7 && as_string(part) == "derpayl");
    auto m3 = ch->recv();
    CHECK(as_string(m3.bytes()) == "copied");
    ch->send(std::move(m1)); // forward
    check_peer(peer);
    // The peer is gone and everything it sent was received.
    CHECK_THROWS_KIND(ch->recv_for(30s), zcio::error_kind::disconnected);
    CHECK(ch->stats().msgs_received == 3);
}

void lane_round_trip() {
    auto sock = path("lane.sock");
    auto l = zcio::listener::bind(sock);
    pid_t peer = spawn([&] {
        auto ch = zcio::channel::connect(sock);
        auto tx = ch.open_lane(8, 256);
        CHECK(tx.slot_size() == 256);
        {
            auto loan = tx.loan();
            CHECK(loan.data().size() == 256);
            std::memcpy(loan.data().data(), "lane one", 8);
            std::move(loan).send(8);
        }
        {
            auto unsent = tx.loan(); // destroyed unsent: the slot comes back
        }
        tx.send_copy(as_bytes("lane two"));
        CHECK(tx.stats().messages == 2);
        // Wait for the parent's word before ending the lane.
        (void)ch.recv();
    });
    auto ch = *l.accept_for(30s);
    auto rx = *ch.accept_lane_for(30s);
    {
        auto a = rx.recv();
        CHECK(as_string(a.bytes()) == "lane one");
        CHECK_THROWS_KIND(rx.try_recv(), zcio::error_kind::busy); // one message at a time
    }
    auto b = rx.recv_for(30s);
    CHECK(b && as_string(b->bytes()) == "lane two");
    b.reset();
    CHECK(!rx.try_recv().has_value());
    CHECK(rx.stats().messages == 2);
    ch.send_copy(as_bytes("done"));
    check_peer(peer);
    CHECK_THROWS_KIND(rx.recv_for(30s), zcio::error_kind::disconnected);
}

void ring_blocks() {
    auto name = unique("blocks");
    zcio::ring_options o;
    o.size = 64 << 10;
    o.layout = zcio::ring_layout::blocks;
    o.exclusive = true;
    zcio::ring_producer p(name, o);
    constexpr std::uint64_t n = 2000;
    pid_t peer = spawn([&] {
        zcio::ring_consumer c(name, zcio::ring_consumer::start::oldest);
        std::array<std::byte, 512> buf{};
        for (std::uint64_t k = 0; k < n; k++) {
            std::uint64_t seq = 0;
            std::size_t len;
            if (k % 2 == 0) {
                len = c.read(buf);
                std::memcpy(&seq, buf.data(), 8);
            } else {
                auto pk = c.peek();
                CHECK(static_cast<bool>(pk));
                len = pk.size();
                std::memcpy(&seq, pk.bytes().data(), 8); // copied out: the volatile rule
                CHECK(std::move(pk).release());
            }
            CHECK(seq == k && len == 8 + k % 300);
        }
        CHECK(c.read(buf) == 0); // the end of the stream
        CHECK(!c.peek());
        auto st = c.stats();
        CHECK(st.read_blocks == n);
    });
    CHECK(p.wait_consumers(1, 30s) == 1);
    std::array<std::byte, 512> buf{};
    for (std::uint64_t k = 0; k < n; k++) {
        std::memcpy(buf.data(), &k, 8);
        std::size_t len = 8 + k % 300;
        CHECK(p.write(std::span(buf).first(len)) == len);
    }
    CHECK(p.counters().blocks == n);
    { auto end = std::move(p); } // the end of the stream
    check_peer(peer);
    CHECK(zcio::ring_unlink(name));
    CHECK(!zcio::ring_unlink(name));
}

void ring_stream_and_fd() {
    auto name = unique("stream");
    zcio::ring_consumer c(name, zcio::ring_consumer::start::newest, 64 << 10);
    std::array<std::byte, 64> buf{};
    CHECK(!c.try_read(buf).has_value());          // nothing yet: no wait
    CHECK(!c.read_for(buf, 20ms).has_value());    // nothing in time
    int fd = c.fd();
    CHECK(fd >= 0);
    pid_t peer = spawn([&] {
        zcio::ring_producer p(name, zcio::ring_options{.size = 64 << 10});
        CHECK(p.wait_consumers(1, 30s) >= 1);
        std::string s = "0123456789";
        for (int i = 0; i < 100; i++) CHECK(p.write(as_bytes(s)) == 10);
    });
    std::size_t got = 0;
    std::string all;
    while (true) {
        auto n = c.try_read(buf);
        if (!n) { // would block: the fd is armed; poll it with the ring's 50 ms rule
            struct pollfd pfd {fd, POLLIN, 0};
            (void)poll(&pfd, 1, 50);
            c.doorbell_rang();
            continue;
        }
        if (*n == 0) break; // the end of the stream
        all.append(reinterpret_cast<const char *>(buf.data()), *n);
        got += *n;
    }
    CHECK(got == 1000);
    for (std::size_t i = 0; i < all.size(); i++) CHECK(all[i] == '0' + static_cast<char>(i % 10));
    check_peer(peer);
    zcio::ring_unlink(name);
}

struct reading {
    std::uint64_t seq;
    double value;
    std::uint32_t sensor;
    std::uint32_t reserved;
};
static_assert(sizeof(reading) == 24);

void typed_round_trip() {
    auto sock = path("typed.sock");
    auto l = zcio::listener::bind(sock);
    pid_t peer = spawn([&] {
        auto ch = zcio::channel::connect(sock);
        zcio::pool pool("typed", 1 << 20, 2);
        zcio::typed<reading> ty("test.Reading", 1);
        auto b = ty.alloc(pool);
        b->seq = 7;
        b->value = 2.5;
        b->sensor = 3;
        ch.send(std::move(b).freeze());
        ty.send(ch, reading{8, -1.0, 4, 0});
        zcio::typed<reading> v2("test.Reading", 2);
        v2.send(ch, reading{9, 0.0, 5, 0});
        (void)ch.recv(); // until the parent is done
    });
    auto ch = *l.accept_for(30s);
    zcio::typed<reading> ty("test.Reading", 1);
    auto r = ty.read(ch.recv());
    CHECK(r.seq == 7 && r.value == 2.5 && r.sensor == 3 && r.reserved == 0);
    auto m = ch.recv();
    CHECK(m.size() == ty.offset() + sizeof(reading));
    r = ty.read(m);
    CHECK(r.seq == 8 && r.value == -1.0 && r.sensor == 4);
    // Another version of the type: refused, as Rust's read_typed refuses it.
    CHECK_THROWS_KIND(ty.read(ch.recv()), zcio::error_kind::malformed);
    ch.send_copy(as_bytes("done"));
    check_peer(peer);
}

/// C++ and C put the same bytes on the wire: a typed message made in C++ is
/// read by C's zcio_msg_read_typed in another process, and C's
/// zcio_send_typed by zcio::typed<T>::read.
void typed_interop_with_c() {
    auto sock = path("interop.sock");
    auto l = zcio::listener::bind(sock);
    pid_t peer = spawn([&] {
        // The C side, in plain C calls.
        zcio_channel *ch = nullptr;
        CHECK(zcio_connect(sock.c_str(), 30000, &ch) == 0);
        zcio_type ty{"test.Interop", 3, sizeof(reading), alignof(reading), 0};
        zcio_msg *m = nullptr;
        CHECK(zcio_recv(ch, 30000, &m) == 0);
        reading r{};
        CHECK(zcio_msg_read_typed(m, &ty, &r, sizeof r) == static_cast<ssize_t>(sizeof r));
        CHECK(r.seq == 41 && r.value == 0.25 && r.sensor == 9);
        // The header C writes is the one the C++ message carries.
        std::array<std::byte, 256> head{}, seen{};
        ssize_t off = zcio_type_tag(&ty, head.data(), head.size());
        CHECK(off == 128);
        CHECK(zcio_msg_read(m, 0, seen.data(), static_cast<std::size_t>(off)) == off);
        CHECK(std::memcmp(head.data(), seen.data(), static_cast<std::size_t>(off)) == 0);
        zcio_msg_release(m);
        reading out{42, 0.5, 10, 0};
        CHECK(zcio_send_typed(ch, &ty, &out, sizeof out, 30000) == 0);
        CHECK(zcio_recv(ch, 30000, &m) == 0); // until the parent is done
        zcio_msg_release(m);
        zcio_channel_close(ch);
    });
    auto ch = *l.accept_for(30s);
    zcio::pool pool("interop", 1 << 20, 2);
    zcio::typed<reading> ty("test.Interop", 3);
    auto b = ty.alloc(pool, reading{41, 0.25, 9, 0});
    ch.send(std::move(b).freeze());
    auto r = ty.read(ch.recv());
    CHECK(r.seq == 42 && r.value == 0.5 && r.sensor == 10);
    ch.send_copy(as_bytes("done"));
    check_peer(peer);
}

void errors_carry_kind() {
    // Connecting to a socket nobody listens on.
    try {
        (void)zcio::channel::connect(path("missing.sock"), {.connect_timeout = 2s});
        CHECK(!"connect to a missing socket succeeded");
    } catch (const zcio::error &e) {
        CHECK(e.kind() == zcio::error_kind::not_found);
        CHECK(e.errnum() == ENOENT);
        CHECK(e.code() == std::error_code(ENOENT, zcio::category()));
        CHECK(!e.detail().empty());
        CHECK(std::string(e.what()).find("zcio_connect_with") != std::string::npos);
    }
    // A ring that does not exist, opened without creating it.
    CHECK_THROWS_KIND(zcio::ring_consumer(unique("nosuchring")), zcio::error_kind::not_found);
    // An empty channel: try_ and _for forms return nullopt, the default wait throws TimedOut.
    auto sock = path("empty.sock");
    auto l = zcio::listener::bind(sock, {.recv_timeout = 100ms});
    CHECK(!l.try_accept().has_value());
    CHECK(!l.accept_for(10ms).has_value());
    pid_t peer = spawn([&] {
        auto ch = zcio::channel::connect(sock);
        (void)ch.recv(); // until the parent is done
    });
    auto ch = *l.accept_for(30s);
    CHECK(!ch.try_recv().has_value());
    CHECK(!ch.recv_for(20ms).has_value());
    CHECK_THROWS_KIND(ch.recv(), zcio::error_kind::timed_out);
    CHECK(ch.stats().recv_timed_out >= 1);
    // Bad arguments are InvalidInput.
    zcio::pool pool("errs", 64 << 10, 1);
    CHECK_THROWS_KIND(pool.alloc(0), zcio::error_kind::invalid_input);
    ch.send_copy(as_bytes("done"));
    check_peer(peer);
    CHECK(std::string(zcio::to_string(zcio::error_kind::would_block)) == "WouldBlock");
    CHECK(zcio::kind_of(-ZCIO_ELAPPED) == zcio::error_kind::lapped);
}

/// A failed send gives the message back (send_error::take_message).
void send_error_returns_message() {
    auto sock = path("senderr.sock");
    auto l = zcio::listener::bind(sock);
    pid_t peer = spawn([&] { auto ch = zcio::channel::connect(sock); });
    auto ch = *l.accept_for(30s);
    check_peer(peer); // the peer is gone
    zcio::pool pool("senderr", 1 << 20, 1);
    auto b = pool.alloc(100);
    fill(b, "kept");
    try {
        ch.send(std::move(b).freeze());
        CHECK(!"send to a dead peer succeeded");
    } catch (zcio::send_error &e) {
        CHECK(e.kind() == zcio::error_kind::disconnected);
        auto m = e.take_message();
        CHECK(m && as_string(m->bytes()) == "kept");
        CHECK(!e.take_message());
    }
}

/// A send that would block gives the message back (try_send, send_for),
/// as crossbeam's TrySendError does.
void try_send_gives_message_back() {
    auto sock = path("full.sock");
    auto l = zcio::listener::bind(sock);
    pid_t peer = spawn([&] {
        auto ch = zcio::channel::connect(sock);
        pause(); // receives nothing; killed at the end
    });
    auto ch = *l.accept_for(30s);
    zcio::pool pool("full", 4 << 20, 4);
    std::optional<zcio::message> back;
    int sent = 0;
    for (; sent < 100000 && !back; sent++) {
        auto b = pool.try_alloc(64);
        CHECK(b.has_value()); // the channel fills before the pool does
        fill(*b, "msg " + std::to_string(sent));
        back = ch.try_send(std::move(*b).freeze());
    }
    CHECK(back.has_value()); // the peer receives nothing: the channel is full at some point
    CHECK(as_string(back->bytes()) == "msg " + std::to_string(sent - 1));
    back = ch.send_for(std::move(*back), 10ms); // still full: back again
    CHECK(back.has_value() && as_string(back->bytes()) == "msg " + std::to_string(sent - 1));
    CHECK(ch.stats().send_would_block >= 1);
    fprintf(stderr, "    the channel took %d messages before it was full\n", sent - 1);
    kill(peer, SIGKILL);
    CHECK(wait_peer(peer) == 128 + SIGKILL);
}

/// RAII frees everything: after many ends are made and destroyed, the
/// process holds as many descriptors as before and the pool no buffer.
void raii_frees_everything() {
    // One round first: the library's process-wide descriptors (if any) are opened once.
    auto round = [](int i) {
        auto sock = path("raii.sock");
        auto l = zcio::listener::bind(sock);
        std::optional<zcio::channel> server;
        std::thread t([&] { server = l.accept_for(30s); });
        auto client = zcio::channel::connect(sock);
        t.join();
        CHECK(server.has_value());
        zcio::pool pool("raii", 1 << 20, 2);
        auto b = pool.alloc(1000);
        fill(b, "x");
        client.send(std::move(b).freeze());
        {
            auto m = server->recv();
            auto tx = server->open_lane(4, 64);
            auto rx = client.accept_lane();
            tx.send_copy(as_bytes("y"));
            auto lm = rx.recv();
            CHECK(lm.size() == 1);
        }
        client.reclaim();
        CHECK(pool.stats().buffers_in_use == 0);
        auto unsent = pool.alloc(10); // destroyed unsent
        auto name = unique("raii") + "-" + std::to_string(i);
        zcio::ring_producer p(name, {.size = 4096});
        zcio::ring_consumer c(name);
        (void)c.fd();
        (void)p.fd();
        p.write(as_bytes("z"));
        auto pk = c.try_peek();
        CHECK(pk && pk->size() == 1);
        zcio::ring_unlink(name);
    };
    round(0);
    int before = open_fds();
    for (int i = 1; i <= 30; i++) round(i);
    int after = open_fds();
    if (after != before)
        throw failure{"descriptors: " + std::to_string(before) + " before, " + std::to_string(after) + " after"};
    // Moved-from handles are empty and destroy nothing twice.
    zcio::pool a("moved", 64 << 10, 1);
    zcio::pool b = std::move(a);
    auto buf = b.alloc(10);
    auto buf2 = std::move(buf);
    static_assert(!std::is_copy_constructible_v<zcio::channel>);
    static_assert(!std::is_copy_constructible_v<zcio::message>);
    static_assert(std::is_nothrow_move_constructible_v<zcio::channel>);
    static_assert(std::is_nothrow_move_constructible_v<zcio::message>);
    static_assert(std::is_nothrow_move_constructible_v<zcio::ring_consumer>);
    static_assert(std::is_nothrow_move_assignable_v<zcio::lane_msg>);
}

/// kill -9 of a peer: the survivor sees Disconnected, bounded, never a hang.
void peer_killed() {
    // A channel sender killed mid-stream.
    auto sock = path("killed.sock");
    auto l = zcio::listener::bind(sock);
    pid_t peer = spawn([&] {
        auto ch = zcio::channel::connect(sock);
        ch.send_copy(as_bytes("before"));
        pause(); // until killed
    });
    auto ch = *l.accept_for(30s);
    auto m = ch.recv_for(30s);
    CHECK(m && as_string(m->bytes()) == "before");
    kill(peer, SIGKILL);
    CHECK(wait_peer(peer) == 128 + SIGKILL);
    CHECK_THROWS_KIND(ch.recv_for(60s), zcio::error_kind::disconnected);
    // A ring producer killed mid-stream.
    auto name = unique("killed");
    zcio::ring_consumer c(name, zcio::ring_consumer::start::oldest, 64 << 10);
    peer = spawn([&] {
        zcio::ring_producer p(name, {.size = 64 << 10});
        p.write(as_bytes("partial"));
        pause();
    });
    std::array<std::byte, 64> buf{};
    CHECK(c.read_for(buf, 30s).value_or(0) == 7);
    kill(peer, SIGKILL);
    CHECK(wait_peer(peer) == 128 + SIGKILL);
    CHECK_THROWS_KIND(c.read_for(buf, 60s), zcio::error_kind::disconnected);
    zcio::ring_unlink(name);
}

// ------------------------------------------------------- rings: the rest

/// A one-byte signal between processes (a pipe): no sleeps to wait for a peer.
struct signal_pipe {
    int fd[2]{-1, -1};
    signal_pipe() {
        if (pipe(fd) != 0) throw failure{"pipe failed"};
    }
    ~signal_pipe() {
        if (fd[0] >= 0) close(fd[0]);
        if (fd[1] >= 0) close(fd[1]);
    }
    void post() { CHECK(write(fd[1], "x", 1) == 1); }
    /// Wait for a post, at most 60 s.
    void await() {
        struct pollfd p {fd[0], POLLIN, 0};
        CHECK(poll(&p, 1, 60'000) == 1);
        char c;
        CHECK(read(fd[0], &c, 1) == 1);
    }
};

std::string block_text(std::uint64_t k) { return "block " + std::to_string(k) + std::string(k % 200, '.'); }

/// Every layout a producer can write: create it (zcio_ring_open_with), a
/// consumer in another process reads every block back, by copy and in
/// place; zcio::ring_stat sees the parameters.
void ring_every_layout() {
    struct layout_case {
        zcio::ring_layout layout;
        std::uint32_t c_layout;
        std::size_t slot_size, entries;
    };
    const layout_case cases[] = {
        {zcio::ring_layout::stream, ZCIO_LAYOUT_CONTINUOUS, 0, 0},
        {zcio::ring_layout::blocks, ZCIO_LAYOUT_VARIABLE, 0, 0},
        {zcio::ring_layout::slotted, ZCIO_LAYOUT_SLOTTED, 512, 0},
        {zcio::ring_layout::descriptors, ZCIO_LAYOUT_DESCRIPTORS, 0, 64},
    };
    for (const auto &lc : cases) {
        auto name = unique("layout") + "-" + std::to_string(lc.c_layout);
        zcio::ring_producer p(name, {.size = 64 << 10,
                                     .layout = lc.layout,
                                     .exclusive = true,
                                     .slot_size = lc.slot_size,
                                     .entries = lc.entries});
        auto st = zcio::ring_stat(name);
        CHECK(st.layout == lc.c_layout && st.overflow == ZCIO_OVERFLOW_BLOCK && st.mode == 0600);
        CHECK(st.size == (64 << 10));
        if (lc.slot_size) CHECK(st.slot_size == lc.slot_size);
        if (lc.entries) CHECK(st.entries == lc.entries);
        constexpr std::uint64_t n = 300;
        const bool stream = lc.layout == zcio::ring_layout::stream;
        pid_t peer = spawn([&] {
            zcio::ring_consumer c(name, zcio::ring_consumer::start::oldest);
            std::string all, want;
            std::array<std::byte, 512> buf{};
            for (std::uint64_t k = 0; k < n; k++) want += block_text(k);
            for (std::uint64_t k = 0; stream ? all.size() < want.size() : k < n; k++) {
                if (k % 2 == 0) {
                    std::size_t len = c.read(buf);
                    CHECK(len > 0);
                    all.append(reinterpret_cast<const char *>(buf.data()), len);
                } else {
                    auto pk = c.peek();
                    CHECK(static_cast<bool>(pk));
                    std::string copy = as_string(pk.bytes()); // copied out: the volatile rule
                    CHECK(pk.is_intact());
                    CHECK(std::move(pk).release());
                    all += copy;
                }
                if (!stream) CHECK(all == want.substr(0, all.size())); // block by block
            }
            CHECK(all == want);
            CHECK(c.read(buf) == 0); // the end of the stream
        });
        CHECK(p.wait_consumers(1, 30s) == 1);
        for (std::uint64_t k = 0; k < n; k++) {
            auto s = block_text(k);
            CHECK(p.write(as_bytes(s)) == s.size());
        }
        { auto end = std::move(p); } // the end of the stream
        check_peer(peer);
        CHECK(zcio::ring_unlink(name));
    }
}

/// reserve -> fill -> commit as types: tags, a commit shorter than the
/// room, aborted and destroyed reservations publish nothing, the producer
/// is busy while one is open; a producer killed (SIGKILL) while it holds a
/// filled reservation: the consumer never sees those bytes.
void ring_reserve_commit() {
    static_assert(!std::is_copy_constructible_v<zcio::ring_reservation>);
    static_assert(std::is_nothrow_move_constructible_v<zcio::ring_reservation>);
    auto name = unique("reserve");
    zcio::ring_producer p(name, {.size = 64 << 10, .layout = zcio::ring_layout::blocks, .exclusive = true});
    pid_t peer = spawn([&] {
        zcio::ring_consumer c(name, zcio::ring_consumer::start::oldest);
        const char *want[] = {"first", "tagged", "third"};
        const std::uint32_t tags[] = {0, 77, 5};
        for (int i = 0; i < 3; i++) {
            auto pk = c.peek();
            CHECK(static_cast<bool>(pk));
            CHECK(as_string(pk.bytes()) == want[i]);
            CHECK(pk.tag() == tags[i]);
            CHECK(std::move(pk).release());
        }
        CHECK(!c.peek()); // the end: nothing aborted ever shows
    });
    CHECK(p.wait_consumers(1, 30s) == 1);
    {
        auto r = p.reserve(64);
        CHECK(r && r.capacity() == 64 && r.bytes().size() == 64);
        std::memcpy(r.bytes().data(), "first", 5);
        CHECK_THROWS_KIND(p.write(as_bytes("x")), zcio::error_kind::busy); // the handle is reserved
        CHECK_THROWS_KIND(std::move(r).commit(65), zcio::error_kind::invalid_input);
        CHECK(r); // still open
        std::move(r).commit(5);
        CHECK(!r);
        CHECK_THROWS_KIND(std::move(r).commit(0), zcio::error_kind::invalid_input);
    }
    {
        auto r = p.reserve(32);
        std::memcpy(r.bytes().data(), "aborted", 7);
        std::move(r).abort();
        CHECK(!r);
    }
    {
        auto r = p.try_reserve(32);
        CHECK(r.has_value());
        std::memcpy(r->bytes().data(), "destroyed", 9);
    } // destroyed uncommitted: aborted
    {
        auto r = p.reserve_for(16, 5s);
        CHECK(r.has_value());
        std::memcpy(r->bytes().data(), "tagged", 6);
        std::move(*r).commit(6, 77);
    }
    CHECK(p.write_tagged(as_bytes("third"), 5) == 5);
    CHECK(p.counters().blocks == 3);
    CHECK_THROWS_KIND(p.reserve(0), zcio::error_kind::invalid_input);
    CHECK_THROWS_KIND(p.reserve(1 << 20), zcio::error_kind::too_large);
    { auto end = std::move(p); }
    check_peer(peer);
    zcio::ring_unlink(name);

    // kill -9 while a filled reservation is held.
    auto killed = unique("reserve-killed");
    signal_pipe created, filled;
    peer = spawn([&] {
        zcio::ring_producer kp(killed, {.size = 64 << 10, .layout = zcio::ring_layout::blocks, .exclusive = true});
        created.post();
        CHECK(kp.wait_consumers(1, 30s) == 1);
        CHECK(kp.write(as_bytes("committed")) == 9);
        auto r = kp.reserve(64);
        std::memset(r.bytes().data(), 'S', r.capacity()); // "secret", never committed
        filled.post();
        pause(); // until killed
    });
    created.await();
    zcio::ring_consumer c(killed, zcio::ring_consumer::start::oldest);
    filled.await();
    std::array<std::byte, 128> buf{};
    CHECK(c.read_for(buf, 30s).value_or(0) == 9);
    CHECK(std::memcmp(buf.data(), "committed", 9) == 0);
    CHECK(!c.try_read(buf).has_value()); // the reservation is not visible
    kill(peer, SIGKILL);
    CHECK(wait_peer(peer) == 128 + SIGKILL);
    CHECK_THROWS_KIND(c.read_for(buf, 60s), zcio::error_kind::disconnected);
    CHECK(std::find(buf.begin(), buf.end(), std::byte{'S'}) == buf.end());
    zcio::ring_unlink(killed);
}

/// Tags and gathered writes across processes (block and stream rings).
void ring_tags_and_gather() {
    auto name = unique("gather");
    zcio::ring_producer p(name, {.size = 64 << 10, .layout = zcio::ring_layout::descriptors, .exclusive = true});
    pid_t peer = spawn([&] {
        zcio::ring_consumer c(name, zcio::ring_consumer::start::oldest);
        auto a = c.peek();
        CHECK(a && as_string(a.bytes()) == "header|payload|trailer" && a.tag() == 0xabcd);
        CHECK(std::move(a).release());
        auto b = c.peek();
        CHECK(b && as_string(b.bytes()) == "one" && b.tag() == 0);
        CHECK(std::move(b).release());
        auto d = c.peek_for(SIZE_MAX, 30s);
        CHECK(d && *d && as_string(d->bytes()) == "tagged-for" && d->tag() == 9);
        CHECK(std::move(*d).release());
        CHECK(!c.peek());
    });
    CHECK(p.wait_consumers(1, 30s) == 1);
    std::string h = "header|", m = "payload|", t = "trailer";
    CHECK(p.write_gather({as_bytes(h), as_bytes(m), as_bytes(t)}, 0xabcd) == 22);
    std::string o = "one";
    std::span<const std::byte> one[] = {as_bytes(o)};
    CHECK(p.try_write_gather(one).value_or(0) == 3);
    CHECK(p.write_tagged_for(as_bytes("tagged-for"), 9, 5s).value_or(0) == 10);
    { auto end = std::move(p); }
    check_peer(peer);
    zcio::ring_unlink(name);

    // A stream keeps the bytes of a gather, not its tag.
    auto sname = unique("gather-stream");
    zcio::ring_producer sp(sname, {.size = 64 << 10, .exclusive = true});
    zcio::ring_consumer sc(sname, zcio::ring_consumer::start::oldest);
    CHECK(sp.write_gather({as_bytes(h), as_bytes(t)}, 3) == 14);
    auto pk = sc.peek();
    CHECK(as_string(pk.bytes()) == "header|trailer" && pk.tag() == 0);
    CHECK(std::move(pk).release());
    zcio::ring_unlink(sname);
}

/// An index ring: a process peeks blocks of a source ring and splices rich
/// pointers to them into an index ring; a third reads the source's bytes
/// through the index.
void ring_index_splice() {
    auto src = unique("splice-src"), idx = unique("splice-idx");
    zcio::ring_producer sp(src, {.size = 64 << 10, .layout = zcio::ring_layout::blocks, .exclusive = true});
    constexpr std::uint64_t n = 50;
    pid_t peer = spawn([&] {
        zcio::ring_producer ip(idx, {.layout = zcio::ring_layout::index, .exclusive = true, .entries = 64});
        zcio::ring_consumer sc(src, zcio::ring_consumer::start::oldest);
        CHECK(ip.wait_consumers(1, 30s) == 1);
        for (std::uint64_t k = 0; k < n; k++) {
            auto pk = sc.peek();
            CHECK(static_cast<bool>(pk));
            ip.splice(pk); // a pointer, no copy
            CHECK(std::move(pk).release());
        }
        zcio::ring_peek none = sc.peek(); // the end of the source
        CHECK(!none);
        CHECK_THROWS_KIND(ip.splice(none), zcio::error_kind::invalid_input);
        CHECK_THROWS_KIND(ip.reserve(8), zcio::error_kind::unsupported);
    });
    CHECK(sp.wait_consumers(1, 30s) == 1); // the index ring exists now
    auto st = zcio::ring_stat(idx);
    CHECK(st.layout == ZCIO_LAYOUT_INDEX && st.entries == 64);
    zcio::ring_consumer ic(idx, zcio::ring_consumer::start::oldest);
    for (std::uint64_t k = 0; k < n; k++) {
        auto s = block_text(k);
        CHECK(sp.write_tagged(as_bytes(s), static_cast<std::uint32_t>(k + 1)) == s.size());
    }
    { auto end = std::move(sp); } // the source ends; its blocks stay readable
    std::array<std::byte, 512> buf{};
    for (std::uint64_t k = 0; k < n; k++) {
        auto pk = ic.peek();
        CHECK(pk && as_string(pk.bytes()) == block_text(k));
        CHECK(std::move(pk).release());
    }
    CHECK(ic.read(buf) == 0); // the splicer ended
    check_peer(peer);
    zcio::ring_unlink(src);
    zcio::ring_unlink(idx);
}

/// The ring directory by name: list, stat, consumers (a live peer, then a
/// killed one evicted), dir and path; wait bounds and consumers().
void ring_list_and_stat() {
    auto a = unique("list-a"), b = unique("list-b");
    zcio::ring_producer pa(a, {.size = 16 << 10, .overflow = zcio::ring_overflow::frp, .mode = 0640});
    zcio::ring_producer pb(b, {.size = 4096, .layout = zcio::ring_layout::slotted, .slot_size = 64});
    auto names = zcio::ring_list();
    CHECK(std::find(names.begin(), names.end(), a) != names.end());
    CHECK(std::find(names.begin(), names.end(), b) != names.end());
    CHECK(zcio::ring_dir() == work_dir);
    CHECK(zcio::ring_path(a) == work_dir + "/zcio-ring." + a);
    CHECK_THROWS_KIND(zcio::ring_path("bad/name"), zcio::error_kind::invalid_input);
    CHECK_THROWS_KIND(zcio::ring_stat(unique("nosuch")), zcio::error_kind::not_found);
    auto sa = zcio::ring_stat(a);
    CHECK(sa.layout == ZCIO_LAYOUT_CONTINUOUS && sa.overflow == ZCIO_OVERFLOW_FRP && sa.size == (16 << 10));
    CHECK(sa.mode == 0640 && sa.producer_pid == static_cast<std::uint32_t>(getpid()));
    auto sb = zcio::ring_stat(b);
    CHECK(sb.layout == ZCIO_LAYOUT_SLOTTED && sb.slot_size == 64);
    CHECK(zcio::ring_stat_consumers(a).empty() && pa.consumers() == 0);

    // Wait bounds: this end's, not the ring's.
    CHECK(pa.wait_bound() == 10s);
    pa.set_wait_bound(250ms);
    CHECK(pa.wait_bound() == 250ms);
    pa.set_wait_bound(zcio::forever);
    CHECK(pa.wait_bound() == zcio::forever);

    signal_pipe attached;
    pid_t peer = spawn([&] {
        zcio::ring_consumer c(a);
        CHECK(c.wait_bound() == 1h);
        c.set_wait_bound(2s);
        CHECK(c.wait_bound() == 2s);
        attached.post();
        pause(); // until killed
    });
    attached.await();
    CHECK(pa.consumers() == 1);
    auto cs = zcio::ring_stat_consumers(a);
    CHECK(cs.size() == 1 && cs[0].pid == static_cast<std::uint32_t>(peer) && cs[0].alive == 1);
    CHECK(zcio::ring_stat(a).consumers == 1);
    kill(peer, SIGKILL);
    CHECK(wait_peer(peer) == 128 + SIGKILL);
    CHECK(pa.consumers(true) == 0); // the dead one evicted
    zcio::ring_unlink(a);
    zcio::ring_unlink(b);
    names = zcio::ring_list();
    CHECK(std::find(names.begin(), names.end(), a) == names.end());
}

struct samples_head {
    std::uint32_t count;
    std::uint32_t reserved;
};

/// Typed messages ending in a flexible array member: C++ to C and back
/// (zcio_type with elem_size), and a pool's huge-page report.
void typed_flex_round_trip() {
    auto sock = path("flex.sock");
    auto l = zcio::listener::bind(sock);
    pid_t peer = spawn([&] {
        // The C side: struct { uint32_t count, reserved; double v[]; } in plain C calls.
        zcio_channel *ch = nullptr;
        CHECK(zcio_connect(sock.c_str(), 30000, &ch) == 0);
        zcio_type ty{"test.Samples", 2, 8, 8, 8};
        zcio_msg *m = nullptr;
        CHECK(zcio_recv(ch, 30000, &m) == 0);
        std::array<std::byte, 8 + 3 * 8> got{};
        CHECK(zcio_msg_read_typed(m, &ty, got.data(), got.size()) == static_cast<ssize_t>(got.size()));
        std::uint32_t count;
        double v[3];
        std::memcpy(&count, got.data(), 4);
        std::memcpy(v, got.data() + 8, sizeof v);
        CHECK(count == 3 && v[0] == 1.5 && v[1] == 2.5 && v[2] == -1.0);
        zcio_msg_release(m);
        CHECK(zcio_recv(ch, 30000, &m) == 0); // the one filled in place
        got = {};
        CHECK(zcio_msg_read_typed(m, &ty, got.data(), got.size()) == static_cast<ssize_t>(got.size()));
        CHECK(zcio_send_typed(ch, &ty, got.data(), got.size(), 30000) == 0);
        zcio_msg_release(m);
        std::array<std::byte, 8 + 2 * 8> out{};
        std::uint32_t two = 2;
        double w[2] = {0.25, 4.0};
        std::memcpy(out.data(), &two, 4);
        std::memcpy(out.data() + 8, w, sizeof w);
        CHECK(zcio_send_typed(ch, &ty, out.data(), out.size(), 30000) == 0);
        CHECK(zcio_send_typed(ch, &ty, out.data(), 8, 30000) == 0); // no elements
        zcio_type other{"test.Other", 2, 8, 8, 8};
        CHECK(zcio_send_typed(ch, &other, out.data(), 8, 30000) == 0);
        CHECK(zcio_recv(ch, 30000, &m) == 0); // until the parent is done
        zcio_msg_release(m);
        zcio_channel_close(ch);
    });
    auto ch = *l.accept_for(30s);
    zcio::typed_flex<samples_head, double> ty("test.Samples", 2);
    CHECK(ty.type().elem_size == 8 && ty.type().align == 8 && ty.type().size == 8);
    const double v[] = {1.5, 2.5, -1.0};
    ty.send(ch, samples_head{3, 0}, v); // by copy
    // reserve -> fill in place -> send; the C side reads it and echoes it.
    zcio::pool fpool("flex", 1 << 20, 2);
    auto fb = ty.alloc(fpool, 3, samples_head{3, 0});
    CHECK(fb.tail().size() == 3 && fb.tail()[2] == 0.0 && fb.head().count == 3);
    std::copy(std::begin(v), std::end(v), fb.tail().begin());
    ch.send(std::move(fb).freeze());
    auto r = ty.read(ch.recv());
    CHECK(r.head.count == 3 && r.tail.size() == 3 && r.tail[0] == 1.5 && r.tail[2] == -1.0); // the echo
    r = ty.read(ch.recv());
    CHECK(r.head.count == 2 && r.tail.size() == 2 && r.tail[0] == 0.25 && r.tail[1] == 4.0);
    auto e = ty.read(ch.recv());
    CHECK(e.head.count == 2 && e.tail.empty());
    CHECK_THROWS_KIND(ty.read(ch.recv()), zcio::error_kind::malformed);
    ch.send_copy(as_bytes("done"));
    check_peer(peer);

    zcio::pool pool("huge", 1 << 20, 2);
    auto b = pool.alloc(4096);
    auto h = pool.huge_pages_status();
    CHECK(h.setting <= 2 && h.chunk_bytes >= (1 << 20) && h.huge_bytes <= h.chunk_bytes);
}

// ------------------------------------------------------------ rendezvous

/// Connect, retrying while the listener is not there yet (the C call does not retry).
zcio::rendezvous rdv_connect(const std::string &sock, const zcio::rendezvous_config &cfg = {}) {
    for (int tries = 0;; tries++) {
        try {
            return zcio::rendezvous::connect(sock, cfg);
        } catch (const zcio::error &e) {
            if ((e.kind() != zcio::error_kind::not_found && e.errnum() != ECONNREFUSED) || tries == 3000) throw;
            usleep(10'000); // the listener is still starting: poll for it, not a synchronisation
        }
    }
}

/// Request/response with call; peer credentials; counters.
void rendezvous_call() {
    auto sock = path("rdv-call.sock");
    auto l = zcio::rendezvous_listener::bind(sock);
    CHECK(l.path() == sock);
    pid_t peer = spawn([&] {
        auto ep = zcio::rendezvous::connect(sock);
        for (std::uint64_t i = 0; i < 3; i++) {
            auto r = ep.call(zcio::envelope(1, {i, 10}));
            CHECK(r.label() == 1 && r.words().size() == 1 && r.word(0) == i + 10);
            CHECK(r.fds().empty() && !r.owns_fds());
        }
        auto r = ep.call_for(zcio::envelope(2), 30s); // the _for form of call
        CHECK(r && r->label() == 3);
        CHECK(ep.peer().pid == getppid());
        auto st = ep.stats();
        CHECK(st.sent_messages == 4 && st.received_messages == 4);
    });
    auto ep = *l.accept_for(30s);
    CHECK(ep.peer().pid == peer && ep.peer().uid == geteuid());
    for (int i = 0; i < 3; i++) {
        auto m = ep.recv();
        CHECK(m.label() == 1 && m.words().size() == 2);
        ep.send(zcio::envelope(m.label(), {m.word(0) + m.word(1)}));
    }
    auto m = ep.recv_for(30s);
    CHECK(m && m->label() == 2 && m->words().empty());
    CHECK(ep.send_for(zcio::envelope(3), 30s));
    check_peer(peer);
    CHECK_THROWS_KIND(ep.recv_for(30s), zcio::error_kind::disconnected);
    CHECK(l.stats().accepted == 1);
    CHECK(ep.stats().received_messages == 4);
    // An envelope is 8 words and 16 descriptors at most.
    std::array<std::uint64_t, 9> nine{};
    CHECK_THROWS_KIND(zcio::envelope(1, nine), zcio::error_kind::too_large);
    static_assert(!std::is_copy_constructible_v<zcio::envelope>);
    static_assert(std::is_nothrow_move_constructible_v<zcio::envelope>);
    static_assert(std::is_nothrow_move_constructible_v<zcio::rendezvous>);
    static_assert(std::is_nothrow_move_assignable_v<zcio::unique_fd>);
}

/// A server over three caller processes: recv_any, then reply_and_recv.
void rendezvous_recv_any() {
    auto sock = path("rdv-any.sock");
    auto l = zcio::rendezvous_listener::bind(sock);
    constexpr int callers = 3, calls = 4;
    std::vector<pid_t> peers;
    for (int c = 0; c < callers; c++)
        peers.push_back(spawn([&, c] {
            auto ep = zcio::rendezvous::connect(sock);
            for (std::uint64_t i = 0; i < calls; i++) {
                auto r = ep.call(zcio::envelope(static_cast<std::uint64_t>(c), {i, 100}));
                CHECK(r.label() == static_cast<std::uint64_t>(c) && r.word(0) == i + 100);
            }
        }));
    std::vector<zcio::rendezvous> eps;
    for (int c = 0; c < callers; c++) eps.push_back(*l.accept_for(30s));
    std::array<int, callers> per{};
    std::vector<int> seen_pid(callers, 0);
    int served = 0;
    auto r = zcio::rendezvous::recv_any(eps);
    for (;;) {
        CHECK(r.index < eps.size());
        per[r.msg.label()]++;
        seen_pid[r.msg.label()] = eps[r.index].peer().pid;
        served++;
        zcio::envelope reply(r.msg.label(), {r.msg.word(0) + r.msg.word(1)});
        try {
            r = eps[r.index].reply_and_recv(reply, eps);
        } catch (const zcio::error &e) {
            CHECK(e.kind() == zcio::error_kind::disconnected); // every caller hung up
            break;
        }
    }
    CHECK(served == callers * calls);
    for (int c = 0; c < callers; c++) {
        CHECK(per[c] == calls);
        CHECK(seen_pid[c] == peers[c]); // the label said who; the kernel agrees
        check_peer(peers[c]);
    }
    // The span-of-pointers form, and the no-wait forms on partners that are gone.
    std::array<zcio::rendezvous *, 2> two{&eps[0], &eps[2]};
    CHECK_THROWS_KIND(zcio::rendezvous::try_recv_any(two), zcio::error_kind::disconnected);
    CHECK_THROWS_KIND(zcio::rendezvous::recv_any_for(std::span<zcio::rendezvous>(eps), 10ms),
                      zcio::error_kind::disconnected);
}

/// A memfd passed each way and read in the other process; received
/// descriptors are closed by RAII (the count returns to where it was).
void rendezvous_descriptors() {
    auto sock = path("rdv-fd.sock");
    auto l = zcio::rendezvous_listener::bind(sock);
    constexpr int rounds = 20;
    pid_t peer = spawn([&] {
        auto ep = zcio::rendezvous::connect(sock);
        int fd = memfd_create("cpp-rdv", MFD_CLOEXEC);
        CHECK(fd >= 0);
        CHECK(write(fd, "secret data", 11) == 11);
        auto r = ep.call(zcio::envelope(1, {11}, {fd}));
        CHECK(fcntl(fd, F_GETFD) >= 0); // sending borrowed it: still ours
        close(fd);
        CHECK(r.fds().size() == 1 && r.owns_fds());
        char buf[16] = {};
        CHECK(pread(r.fds()[0], buf, sizeof buf, 0) == 5 && std::memcmp(buf, "reply", 5) == 0);
        // Many envelopes of three descriptors each, for the parent to drop.
        int a = memfd_create("a", MFD_CLOEXEC), b = dup(a), c = dup(a);
        for (int i = 0; i < rounds; i++) ep.send(zcio::envelope(2, {}, {a, b, c}));
        ep.send(zcio::envelope(3, {}, {a}));
        (void)ep.recv(); // until the parent is done
    });
    auto ep = *l.accept_for(30s);
    auto m = ep.recv();
    CHECK(m.label() == 1 && m.fds().size() == 1 && m.owns_fds());
    char buf[32] = {};
    CHECK(pread(m.fds()[0], buf, sizeof buf, 0) == 11 && std::string(buf) == "secret data");
    {
        zcio::unique_fd mine(memfd_create("reply", MFD_CLOEXEC));
        CHECK(write(mine.get(), "reply", 5) == 5);
        ep.send(zcio::envelope(1, {}, {mine.get()}));
    }
    int before = open_fds();
    for (int i = 0; i < rounds; i++) {
        auto e = ep.recv();
        CHECK(e.label() == 2 && e.fds().size() == 3);
        CHECK(open_fds() == before + 3);
        if (i % 2 == 0) {
            zcio::envelope moved = std::move(e); // the descriptors move with it
            CHECK(moved.owns_fds() && !e.owns_fds());
        } else {
            auto fds = e.take_fds(); // out of the envelope: each closes its own
            CHECK(fds.size() == 3 && e.fds().empty() && fds[1]);
        }
        CHECK(open_fds() == before); // closed with the envelope, or with the unique_fds
    }
    CHECK(open_fds() == before);
    {
        auto e = ep.recv();
        auto fds = e.take_fds();
        int raw = fds[0].release(); // released: ours to close
        fds.clear();
        CHECK(fcntl(raw, F_GETFD) >= 0);
        close(raw);
        CHECK_THROWS_KIND(m.set_fds(std::span<const int>()), zcio::error_kind::invalid_input); // m owns its fd
    }
    { auto drop = std::move(m); }
    CHECK(open_fds() == before - 1); // m's descriptor is closed too
    ep.send(zcio::envelope(9));
    check_peer(peer);
    CHECK(ep.stats().descriptors >= 2 + 3 * rounds);
}

/// No wait and bounded waits: the try_ and _for forms say nullopt / false,
/// the default form throws timed_out after the configured bound.
void rendezvous_timeouts() {
    auto sock = path("rdv-to.sock");
    auto l = zcio::rendezvous_listener::bind(sock, {.recv_timeout = 100ms, .accept_timeout = 50ms});
    CHECK(!l.try_accept().has_value());
    CHECK(!l.accept_for(10ms).has_value());
    CHECK_THROWS_KIND(l.accept(), zcio::error_kind::timed_out);
    int go[2];
    CHECK(pipe(go) == 0);
    pid_t peer = spawn([&] {
        auto ep = zcio::rendezvous::connect(sock);
        char c;
        CHECK(read(go[0], &c, 1) == 1); // not in a receive until the parent says so
        auto m = ep.recv_for(30s);
        CHECK(m && m->label() == 5);
    });
    auto ep = *l.accept_for(30s);
    CHECK(!ep.try_recv().has_value());
    CHECK(!ep.recv_for(20ms).has_value());
    CHECK_THROWS_KIND(ep.recv(), zcio::error_kind::timed_out);
    CHECK(!ep.try_send(zcio::envelope(4))); // the partner is not receiving: not sent
    CHECK(!ep.send_for(zcio::envelope(4), 20ms));
    CHECK(!ep.call_for(zcio::envelope(4), 20ms).has_value());
    std::array<zcio::rendezvous *, 1> one{&ep};
    CHECK(!zcio::rendezvous::try_recv_any(one).has_value());
    CHECK(!zcio::rendezvous::recv_any_for(one, 10ms).has_value());
    CHECK(ep.stats().timed_out >= 4);
    CHECK(write(go[1], "g", 1) == 1);
    ep.send(zcio::envelope(5)); // the timed-out ones were taken back: this is the first it gets
    check_peer(peer);
}

/// A partner killed with SIGKILL: every wait ends with disconnected, bounded.
void rendezvous_peer_killed() {
    auto sock = path("rdv-kill.sock");
    auto l = zcio::rendezvous_listener::bind(sock);
    pid_t peer = spawn([&] {
        auto ep = zcio::rendezvous::connect(sock);
        ep.send(zcio::envelope(1));
        pause(); // until killed
    });
    auto ep = *l.accept_for(30s);
    CHECK(ep.recv_for(30s)->label() == 1);
    kill(peer, SIGKILL);
    CHECK(wait_peer(peer) == 128 + SIGKILL);
    CHECK_THROWS_KIND(ep.recv_for(60s), zcio::error_kind::disconnected);
    CHECK_THROWS_KIND(ep.send(zcio::envelope(2)), zcio::error_kind::disconnected);
    CHECK_THROWS_KIND(ep.call(zcio::envelope(2)), zcio::error_kind::disconnected);
    CHECK(ep.stats().disconnected >= 1);
}

/// The event-loop calls: a send in steps and a receive on the doorbell.
void rendezvous_event_loop() {
    auto sock = path("rdv-loop.sock");
    auto l = zcio::rendezvous_listener::bind(sock);
    int go[2];
    CHECK(pipe(go) == 0);
    pid_t peer = spawn([&] {
        auto ep = zcio::rendezvous::connect(sock);
        for (int i = 0; i < 10; i++) {
            auto m = ep.recv();
            ep.send(zcio::envelope(m.label() + 1));
        }
        char c;
        CHECK(read(go[0], &c, 1) == 1); // not in a receive until the parent says so
        CHECK(ep.recv().label() == 100);
    });
    auto ep = *l.accept_for(30s);
    int fd = ep.fd();
    CHECK(fd >= 0);
    auto wait_bell = [&] {
        struct pollfd p {fd, POLLIN, 0};
        (void)poll(&p, 1, 1000); // a bound on each sleep, in case a ring was missed
        return ep.doorbell_rang();
    };
    for (std::uint64_t i = 0; i < 10; i++) {
        auto s = ep.send_begin(zcio::envelope(i * 10));
        while (!s.poll()) (void)wait_bell();
        CHECK(s.done());
        std::optional<zcio::envelope> m;
        while (!(m = ep.try_recv())) {
            if (ep.prepare_recv_sleep()) CHECK(!wait_bell());
        }
        CHECK(m->label() == i * 10 + 1);
    }
    // A begun send the partner does not take: cancel() takes it back; a
    // pending_send destroyed unfinished gives its send up.
    auto s = ep.send_begin(zcio::envelope(1));
    CHECK_THROWS_KIND(ep.send_begin(zcio::envelope(2)), zcio::error_kind::would_block);
    CHECK(std::move(s).cancel()); // taken back, undelivered
    { auto dropped = ep.send_begin(zcio::envelope(3)); }
    CHECK(write(go[1], "g", 1) == 1);
    ep.send(zcio::envelope(100)); // the first the partner gets after the loop
    check_peer(peer);
}

// ------------------------------------------------------------ proxy threads

/// Many sends queued through proxy threads, all delivered in order; call,
/// post, recv; counters.
void proxy_many_sends() {
    auto sock = path("proxy.sock");
    auto l = zcio::rendezvous_listener::bind(sock);
    constexpr std::uint64_t n = 1000;
    pid_t peer = spawn([&] {
        auto ep = rdv_connect(sock);
        for (std::uint64_t i = 0; i < n; i++) {
            auto m = ep.recv();
            CHECK(m.label() == 1 && m.word(0) == i); // in order
        }
        auto req = ep.recv(); // the call
        CHECK(req.label() == 2);
        ep.send(zcio::envelope(3, {req.word(0) * 2}));
        ep.send(zcio::envelope(4)); // for the posted handle
        ep.send(zcio::envelope(5)); // for recv
        (void)ep.recv();            // until the parent is done
    });
    zcio::proxies pool({.max_proxies = 4});
    zcio::proxy_endpoint pe(*l.accept_for(30s), pool); // the endpoint is pe's now
    CHECK(pe.peer().pid == peer);
    std::vector<zcio::ticket> tickets;
    for (std::uint64_t i = 0; i < n; i++) tickets.push_back(pe.send(zcio::envelope(1, {i}))); // returns at once
    for (auto &t : tickets) t.wait(); // delivered, in order, or throws
    for (auto &t : tickets) CHECK(t.status() == zcio::ticket_status::delivered && !t.failure());
    CHECK(pe.stats().delivered == n && pe.stats().failed == 0);
    auto answer = pe.call(zcio::envelope(2, {21}));
    auto a = answer.wait_for(30s);
    CHECK(a && a->label() == 3 && a->word(0) == 42);
    auto posted = pe.post();
    auto p = posted.wait();
    CHECK(p.label() == 4);
    CHECK_THROWS_KIND(posted.try_wait(), zcio::error_kind::invalid_input); // collected once
    auto r = pe.recv_for(30s);
    CHECK(r && r->label() == 5);
    CHECK(!pe.try_recv().has_value());
    CHECK(pool.stats().spawned >= 1);
    auto last = pe.send(zcio::envelope(6));
    CHECK(last.wait_for(30s));
    check_peer(peer);
}

/// A partner killed with tickets pending: every one fails with disconnected;
/// a queue at its quota refuses (try_send: nullopt).
void proxy_partner_killed() {
    auto sock = path("proxy-kill.sock");
    // (a delivery waits for the partner up to the send bound: longer than the test)
    auto l = zcio::rendezvous_listener::bind(sock, {.send_timeout = 120s});
    pid_t peer = spawn([&] {
        auto ep = rdv_connect(sock);
        pause(); // receives nothing; killed
    });
    zcio::proxy_endpoint pe(*l.accept_for(30s)); // the library's shared proxy threads
    pe.set_quota(8);
    std::vector<zcio::ticket> tickets;
    for (int i = 0; i < 1000; i++) {
        auto t = pe.try_send(zcio::envelope(1, {static_cast<std::uint64_t>(i)}));
        if (!t) break; // the queue holds its quota
        tickets.push_back(std::move(*t));
    }
    CHECK(tickets.size() >= 8 && tickets.size() < 1000);
    // The blocking form refuses at the quota too. A proxy thread that had not yet taken
    // the first envelope into its (never answered) rendezvous send takes it now and frees
    // a place: a send may then succeed once, until the queue is full again.
    bool refused = false;
    for (int i = 0; i < 1000 && !refused; i++) {
        try {
            tickets.push_back(pe.send(zcio::envelope(2)));
        } catch (const zcio::error &e) {
            CHECK(e.kind() == zcio::error_kind::would_block);
            refused = true;
        }
    }
    CHECK(refused && tickets.size() < 1000);
    CHECK(!tickets.back().try_wait());
    CHECK(!tickets.back().wait_for(10ms));
    CHECK(tickets.back().status() == zcio::ticket_status::pending);
    auto h = pe.post();
    CHECK(!h.ready() && !h.try_wait().has_value());
    kill(peer, SIGKILL);
    CHECK(wait_peer(peer) == 128 + SIGKILL);
    for (auto &t : tickets) {
        CHECK_THROWS_KIND(t.wait(), zcio::error_kind::disconnected);
        CHECK(t.status() == zcio::ticket_status::failed);
        CHECK(t.failure() && t.failure()->kind() == zcio::error_kind::disconnected);
    }
    CHECK_THROWS_KIND(h.wait_for(60s), zcio::error_kind::disconnected);
    CHECK_THROWS_KIND(pe.recv_for(60s), zcio::error_kind::disconnected);
    CHECK(pe.stats().failed == tickets.size());
    pe.close();
    CHECK_THROWS_KIND(pe.send(zcio::envelope(3)), zcio::error_kind::disconnected);
}

void timeouts_convert() {
    CHECK(zcio::detail::timeout_ms(0ms) == 0);
    CHECK(zcio::detail::timeout_ms(-5ms) == 0);
    CHECK(zcio::detail::timeout_ms(1us) == 1);
    CHECK(zcio::detail::timeout_ms(1500us) == 2);
    CHECK(zcio::detail::timeout_ms(3s) == 3000);
    CHECK(zcio::detail::timeout_ms(zcio::forever) == ZCIO_TIMEOUT_INFINITE);
    CHECK(zcio::detail::timeout_ms(std::chrono::hours(24 * 365 * 100)) == ZCIO_TIMEOUT_INFINITE);
}

// ------------------------------------------------------- buffering semantics

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
    std::vector<std::byte> v(n);
    for (std::size_t k = 0; k < n; k++) v[k] = static_cast<std::byte>((k * 7) ^ (seed * 131) ^ (k >> 9) ^ 0x5a);
    return v;
}
bool same(std::span<const std::byte> a, std::span<const std::byte> b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

zcio::semantic_config sem_config(zcio::semantics out, zcio::semantics in, bool trust) {
    zcio::semantic_config c;
    c.output = out;
    c.input = in;
    c.arena_capacity = 16 << 20;
    c.hello_timeout = 30s;
    c.trust_peer = trust;
    c.ignore_cost_model = true; // the mechanisms themselves, whatever the cost model prefers here
    return c;
}

/// Hellos both ways (peer), emulated copy of an arena buffer that the sender
/// overwrites at once (the receiver sees the bytes of the output, swapped into
/// an arena buffer at the sender's page offset), a move of a system-allocated
/// buffer back, then the peer killed: disconnected, not a hang.
void semantic_round_trip() {
    auto sock = path("sem.sock");
    auto l = zcio::listener::bind(sock);
    constexpr std::size_t n = (256 << 10) + 300;
    pid_t peer = spawn([&] {
        zcio::semantic_endpoint ep(zcio::channel::connect(sock),
                                   sem_config(zcio::semantics::emulated_copy, zcio::semantics::move, true));
        auto hello = ep.peer();
        CHECK(hello.input == zcio::semantics::emulated_copy && hello.trusts);
        auto b = ep.arena_alloc(n, 300);
        CHECK(b.size() == n);
        auto want = pattern(n, 1);
        std::memcpy(b.bytes().data(), want.data(), n);
        auto d = ep.output(b.bytes());
        CHECK(d == zcio::delivery::write_protected);
        std::memset(b.bytes().data(), 0xee, n); // TCOW: the peer never sees this
        auto got = ep.input_owned(zcio::semantics::move);
        CHECK(same(got.bytes(), pattern(4096 * 3, 2)));
        ep.free(std::move(got));
        ep.output(as_bytes("ok"), zcio::semantics::copy);
        pause(); // killed by the test
    });
    auto ep = zcio::semantic_endpoint(*l.accept_for(30s),
                                      sem_config(zcio::semantics::move, zcio::semantics::emulated_copy, true));
    auto hello = ep.peer();
    CHECK(hello.input == zcio::semantics::move && hello.trusts);
    auto layout = ep.next_for(30s);
    CHECK(layout && layout->len == n && layout->page_offset == 300);
    auto dst = ep.arena_alloc(layout->len, layout->page_offset);
    auto r = ep.input(dst.bytes());
    CHECK(r.len == n && r.sender == ZCIO_SEM_EMULATED_COPY && r.swapped_pages > 0);
    CHECK(same(dst.bytes(), pattern(n, 1)));
    CHECK(!ep.try_next());

    auto o = ep.alloc(4096 * 3);
    auto v = pattern(4096 * 3, 2);
    std::memcpy(o.bytes().data(), v.data(), v.size());
    CHECK(ep.output_owned(std::move(o)) == zcio::delivery::sealed);
    CHECK(o.native_handle() == nullptr); // consumed
    CHECK(ep.stats().in_swapped_pages > 0 && ep.stats().out_sealed == 1);
    CHECK(ep.rewrite_tolerance(n) == 1.0); // ignore_cost_model
    std::vector<std::byte> ok(16);
    CHECK(ep.input(ok).len == 2 && as_string(std::span(ok).first(2)) == "ok");

    kill(peer, SIGKILL);
    CHECK(wait_peer(peer) == 128 + SIGKILL);
    std::vector<std::byte> buf(16);
    CHECK_THROWS_KIND(ep.input(buf), zcio::error_kind::disconnected);
    // Names and bad arguments.
    CHECK(zcio::name(zcio::semantics::emulated_weak_move) == "emulated-weak-move");
    CHECK(zcio::parse_semantics("EMULATED_COPY") == zcio::semantics::emulated_copy);
    CHECK_THROWS_KIND(zcio::parse_semantics("nope"), zcio::error_kind::invalid_input);
    // A config the endpoint refuses leaves the channel with the caller.
    auto bad_sock = path("bad.sock");
    auto l2 = zcio::listener::bind(bad_sock);
    pid_t quiet = spawn([&] {
        auto c = zcio::channel::connect(bad_sock);
        CHECK_THROWS_KIND(c.recv(), zcio::error_kind::disconnected);
    });
    auto ch = *l2.accept_for(30s);
    zcio::semantic_config cfg;
    cfg.rewrite_tolerance = 2.0;
    CHECK_THROWS_KIND(zcio::semantic_endpoint(std::move(ch), cfg), zcio::error_kind::invalid_input);
    CHECK(ch.native_handle() != nullptr);
    { auto gone = std::move(ch); } // closed here: the peer sees disconnected
    check_peer(quiet);
}

/// The spin policy (process-wide), and the cost model: a peer calibrates
/// (quick) and saves the file; this process loads it, and a second peer
/// started with ZCIO_CALIBRATION decides with it.
void spin_policy_and_cost_model() {
    auto before = zcio::spin_policy::current();
    CHECK(before.max >= before.task_max);
    zcio::spin_policy::set({0us, 0us});
    auto now = zcio::spin_policy::current();
    CHECK(now.max == 0us && now.task_max == 0us);
    zcio::spin_policy::set({200us, 20us});
    now = zcio::spin_policy::current();
    CHECK(now.max == 200us && now.task_max == 20us);
    zcio::spin_policy::set(before);

    auto file = path("cal/calibration.json");
    check_peer(spawn([&] {
        auto m = zcio::cost_model::calibrate(true);
        CHECK(m.source() == "measured");
        m.save(file);
    }));
    auto m = zcio::cost_model::load(file);
    CHECK(m.source() == "file");
    double small = m.cost("copy_in", 4096), big = m.cost("copy_in", 4 << 20);
    CHECK(small > 0 && big > small);
    CHECK(m.predict(zcio::semantics::emulated_copy, 1 << 20) > 0);
    CHECK(m.predict(zcio::semantics::copy, 1 << 20, false) > 0);
    CHECK_THROWS_KIND(m.cost("teleport", 1), zcio::error_kind::invalid_input);
    auto j = zcio::cost_model::from_json(m.to_json());
    CHECK(j.cost("copy_in", 4 << 20) == big && j.to_json() == m.to_json());
    CHECK(zcio::cost_model::builtin().source() == "builtin");
    CHECK_THROWS_KIND(zcio::cost_model::load(path("nope.json")), zcio::error_kind::not_found);
    CHECK_THROWS_KIND(zcio::cost_model::from_json("not json"), zcio::error_kind::protocol);

    setenv("ZCIO_CALIBRATION", file.c_str(), 1);
    CHECK(zcio::calibration_path() == file);
    check_peer(spawn([&] {
        // (The model is read once per process, on first use: not yet here.)
        auto cur = zcio::cost_model::current();
        CHECK(cur.source() == "file");
        CHECK(cur.cost("copy_in", 4 << 20) == big);
    }));
    unsetenv("ZCIO_CALIBRATION");
    unsetenv("XDG_CONFIG_HOME");
    unsetenv("HOME");
    CHECK(!zcio::calibration_path());
}

// ------------------------------------- shaping messages, pools, forwarding

void msg_split_clip_join() {
    // A three-part message from one child, cut and rejoined here without a
    // copy, then forwarded (and copied) to a second child that checks the bytes.
    auto in_sock = path("shape-in.sock"), out_sock = path("shape-out.sock");
    auto in_l = zcio::listener::bind(in_sock);
    auto out_l = zcio::listener::bind(out_sock);
    pid_t sender = spawn([&] {
        auto ch = zcio::channel::connect(in_sock);
        zcio::pool pool("shape", 1 << 20, 4);
        auto a = pool.alloc(64), b = pool.alloc(64), c = pool.alloc(64);
        fill(a, "head-");
        fill(b, "middle-part");
        fill(c, "-tail");
        auto m = std::move(a).freeze();
        m.join(std::move(b).freeze()).join(std::move(c).freeze()); // outgoing: as append()
        CHECK(m.slice_count() == 3);
        CHECK_THROWS_KIND(m.split(2), zcio::error_kind::invalid_input);
        CHECK(!m.is_secured());
        ch.send(std::move(m));
        // Until the parent hangs up.
        CHECK_THROWS_KIND(ch.recv_for(60s), zcio::error_kind::disconnected);
    });
    pid_t checker = spawn([&] {
        auto ch = zcio::channel::connect(out_sock);
        auto joined = ch.recv_for(30s);
        CHECK(joined && joined->slice_count() == 2 && copy_of(*joined) == "head-part");
        auto sl = joined->slices();
        CHECK(as_string(sl[0]) == "head-" && as_string(sl[1]) == "part");
        auto copied = ch.recv_for(30s);
        CHECK(copied && copied->slice_count() == 1 && as_string(copied->bytes()) == "head-part");
    });
    auto in = *in_l.accept_for(30s);
    auto out = *out_l.accept_for(30s);
    auto m = in.recv();
    CHECK(m.slice_count() == 3 && copy_of(m) == "head-middle-part-tail");
    CHECK(!m.is_secured());
    auto rest = m.split(5); // m: "head-", rest: "middle-part-tail"
    CHECK(copy_of(m) == "head-" && copy_of(rest) == "middle-part-tail");
    CHECK_THROWS_KIND(m.split(6), zcio::error_kind::out_of_range);
    CHECK_THROWS_KIND(rest.clip(10, 7), zcio::error_kind::out_of_range);
    rest.clip(7, 5); // "part": the slices cut away entirely are released
    CHECK(copy_of(rest) == "part" && rest.slice_count() == 1);
    zcio::pool pool("shape-copy", 1 << 20, 2);
    auto outgoing = pool.alloc(8);
    fill(outgoing, "x");
    auto frozen = std::move(outgoing).freeze();
    CHECK_THROWS_KIND(m.join(std::move(frozen)), zcio::error_kind::invalid_input);
    m.join(std::move(rest));
    CHECK(rest.native_handle() == nullptr); // consumed
    CHECK(m.slice_count() == 2 && copy_of(m) == "head-part");
    // copy_into: one fresh slice of this process's pool; m stays ours.
    auto c = zcio::copy_into(pool, m);
    CHECK(c.slice_count() == 1 && copy_of(c) == "head-part" && copy_of(m) == "head-part");
    auto c2 = zcio::copy_into_for(pool, m, 5s);
    CHECK(c2 && copy_of(*c2) == "head-part");
    CHECK_THROWS_KIND(zcio::copy_into(pool, frozen), zcio::error_kind::invalid_input);
    out.send(std::move(m)); // by reference: the sender's pages
    out.send(std::move(*c2));
    check_peer(checker);
    { auto gone = std::move(in); } // the sender may go
    check_peer(sender);
}

void pool_config_and_reclaim() {
    const std::size_t page = zcio::page_size();
    CHECK(page == static_cast<std::size_t>(sysconf(_SC_PAGESIZE)));
    const std::uint64_t chunk = 16 * page;
    zcio::pool_config cfg{.chunk_size = chunk, .max_chunks = 1, .populate = false, .alloc_timeout = 2s};
    auto pool = zcio::pool::create("cpp-cfg", cfg);
    auto got = pool.config();
    CHECK(got.chunk_size == chunk && got.max_chunks == 1 && !got.populate);
    CHECK(got.quick_list_cap == 64 && got.alloc_timeout == 2s);
    CHECK(got.retire_budget == chunk && got.spin.has_value());
    CHECK_THROWS_KIND(zcio::pool::create("bad", {.max_chunks = 0}), zcio::error_kind::invalid_input);
    // max_chunks reached: try_alloc says so.
    {
        auto whole = pool.alloc(chunk);
        CHECK(!pool.try_alloc(page).has_value());
    }
    // reclaim_all after the receiver holding the only chunk is killed -9.
    auto sock = path("reclaim.sock");
    auto l = zcio::listener::bind(sock);
    pid_t peer = spawn([&] {
        auto ch = zcio::channel::connect(sock);
        auto held = ch.recv_for(30s);
        CHECK(held && held->size() == chunk);
        ch.send_copy(as_bytes("held"));
        pause(); // holding it, until killed
    });
    auto ch = *l.accept_for(30s);
    ch.send(pool.alloc(chunk).freeze());
    auto ack = ch.recv_for(30s);
    CHECK(ack && as_string(ack->bytes()) == "held");
    CHECK(!pool.try_alloc(page).has_value());
    CHECK(pool.reclaim_all() == 0); // still held
    kill(peer, SIGKILL);
    CHECK(wait_peer(peer) == 128 + SIGKILL);
    CHECK_THROWS_KIND(ch.recv_for(60s), zcio::error_kind::disconnected);
    (void)pool.reclaim_all();
    CHECK(pool.alloc_for(chunk, 30s).has_value()); // back, or its chunk replaced
}

void forward_between_children() {
    auto up_sock = path("fwd-up.sock"), down_sock = path("fwd-down.sock");
    auto up_l = zcio::listener::bind(up_sock);
    auto down_l = zcio::listener::bind(down_sock);
    constexpr int n = 20;
    pid_t producer = spawn([&] {
        auto ch = zcio::channel::connect(up_sock);
        for (int i = 0; i < n; i++) ch.send_copy(as_bytes("message " + std::to_string(i)));
        // Leaves: the forwarder ends with upstream_disconnected after forwarding all.
    });
    pid_t consumer = spawn([&] {
        auto ch = zcio::channel::connect(down_sock);
        for (int i = 0; i < n; i++) {
            auto m = ch.recv_for(30s);
            CHECK(m && copy_of(*m) == "message " + std::to_string(i));
        }
        CHECK_THROWS_KIND(ch.recv_for(60s), zcio::error_kind::disconnected);
    });
    auto up = *up_l.accept_for(30s);
    auto down = *down_l.accept_for(30s);
    CHECK_THROWS_KIND(zcio::forward(up, up), zcio::error_kind::invalid_input);
    CHECK_THROWS_KIND(zcio::forward(up, down, {.batch = 0}), zcio::error_kind::invalid_input);
    std::uint64_t bytes = 0;
    for (int i = 0; i < n; i++) bytes += ("message " + std::to_string(i)).size();
    auto r = zcio::forward(up, down, {.batch = 4});
    CHECK(r.end == zcio::forward_end::upstream_disconnected);
    CHECK(r.error == 0 && r.msgs == n && r.bytes == bytes && r.errors == 0 && r.batches >= 1);
    check_peer(producer);
    check_peer(consumer);
}

void misc_calls() {
    CHECK(zcio::page_size() == static_cast<std::size_t>(sysconf(_SC_PAGESIZE)));
    CHECK(zcio::mover_name(ZCIO_MOVER_SPLICE) == "splice" && zcio::mover_name(ZCIO_MOVER_BUFFER) == "buffer");
    CHECK(zcio::mover_name(-1) == "unknown");
    // set_non_dumpable, in a child (it is for the whole process).
    pid_t peer = spawn([] {
        CHECK(prctl(PR_GET_DUMPABLE) == 1);
        zcio::set_non_dumpable();
        CHECK(prctl(PR_GET_DUMPABLE) == 0);
    });
    check_peer(peer);
    CHECK(prctl(PR_GET_DUMPABLE) == 1);
    // The consumer's event-loop hook: prepare_read_sleep, the bell, then read.
    auto name = unique("readsleep");
    zcio::ring_consumer c(name, zcio::ring_consumer::start::oldest, 64 << 10);
    signal_pipe go;
    peer = spawn([&] {
        zcio::ring_producer p(name, {.size = 64 << 10});
        go.await();
        p.write(as_bytes("rang"));
    });
    std::array<std::byte, 64> buf{};
    CHECK(!c.try_read(buf).has_value());
    CHECK(c.prepare_read_sleep()); // armed: sleep on the bell
    go.post();
    std::optional<std::size_t> got;
    for (int i = 0; i < 1200 && !got; i++) { // at most a minute of 50 ms rounds
        pollfd pfd{c.fd(), POLLIN, 0};
        (void)poll(&pfd, 1, 50);
        c.doorbell_rang();
        got = c.try_read(buf);
        if (!got && !c.prepare_read_sleep()) got = c.try_read(buf);
    }
    CHECK(got && *got == 4 && as_string(std::span(buf).first(4)) == "rang");
    check_peer(peer);
    zcio::ring_unlink(name);
}


// ------------------------------------------------------------ associations

/// Byte k of the association tests' stream.
unsigned char stream_byte(std::uint64_t k) { return static_cast<unsigned char>((k * 2654435761u) >> 13); }
std::uint64_t fnv_stream(std::uint64_t h, const unsigned char *b, std::size_t n, std::uint64_t at) {
    for (std::size_t i = 0; i < n; i++) {
        if (b[i] != stream_byte(at + i)) return 0; // wrong byte: a hash nothing matches
        h = (h ^ b[i]) * 0x100000001b3ull;
    }
    return h;
}
/// A file of `size` stream bytes; its descriptor, open for reading.
int stream_file(const std::string &p, std::uint64_t size) {
    int fd = open(p.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    std::vector<unsigned char> b(1 << 16);
    for (std::uint64_t at = 0; at < size; at += b.size()) {
        std::size_t n = std::min<std::uint64_t>(b.size(), size - at);
        for (std::size_t i = 0; i < n; i++) b[i] = stream_byte(at + i);
        CHECK(write(fd, b.data(), n) == static_cast<ssize_t>(n));
    }
    CHECK(lseek(fd, 0, SEEK_SET) == 0);
    return fd;
}
/// Whether the file at `p` holds exactly `size` stream bytes.
bool is_stream(const std::string &p, std::uint64_t size) {
    int fd = open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    std::vector<unsigned char> b(1 << 16);
    std::uint64_t at = 0;
    ssize_t n;
    bool ok = true;
    while (ok && (n = read(fd, b.data(), b.size())) > 0) {
        ok = fnv_stream(1, b.data(), static_cast<std::size_t>(n), at) != 0;
        at += static_cast<std::uint64_t>(n);
    }
    close(fd);
    return ok && at == size;
}

/// A file into a channel whose receiver is a peer process; labels, status.
void assoc_file_to_peer_channel() {
    const std::uint64_t size = (5u << 20) + 321;
    auto sock = path("assoc.sock");
    auto l = zcio::listener::bind(sock);
    pid_t peer = spawn([&] {
        auto ch = zcio::channel::connect(sock);
        std::uint64_t at = 0;
        try {
            for (;;) {
                auto m = ch.recv();
                auto v = m.to_vector();
                CHECK(fnv_stream(1, reinterpret_cast<const unsigned char *>(v.data()), v.size(), at) != 0);
                at += v.size();
            }
        } catch (const zcio::error &e) {
            CHECK(e.kind() == zcio::error_kind::disconnected); // the association closed
        }
        CHECK(at == size);
    });
    auto ch = l.accept_for(30s);
    CHECK(ch.has_value());
    int fd = stream_file(path("assoc.src"), size);
    auto a = zcio::splice(fd, std::move(*ch));
    CHECK(a.source_label() == "fd:" + std::to_string(fd));
    close(fd);
    CHECK(a.sink_label() == "channel");
    auto st = a.status();
    CHECK(st.mover == ZCIO_MOVER_BUFFER && st.moved == 0 && !st.active);
    auto c = a.run();
    CHECK(c.error == 0 && c.eof && c.moved == size);
    CHECK(a.stats().completed == 1);
    auto fin = a.close(); // closes the channel: the peer sees the end
    CHECK(fin.moved == size && fin.copied == 0);
    CHECK(a.native_handle() == nullptr);
    check_peer(peer);
}

/// A peer's channel messages into a file; the peer killed with SIGKILL ends
/// the source.
void assoc_peer_channel_killed() {
    const std::uint64_t size = (3u << 20) + 77;
    auto sock = path("assoc-src.sock");
    auto l = zcio::listener::bind(sock);
    int ready[2];
    CHECK(pipe2(ready, O_CLOEXEC) == 0);
    pid_t peer = spawn([&] {
        auto ch = zcio::channel::connect(sock);
        std::vector<std::byte> b(60000);
        for (std::uint64_t at = 0; at < size; at += b.size()) {
            std::size_t n = std::min<std::uint64_t>(b.size(), size - at);
            for (std::size_t i = 0; i < n; i++) b[i] = std::byte{stream_byte(at + i)};
            ch.send_copy(std::span<const std::byte>(b.data(), n));
        }
        CHECK(write(ready[1], "s", 1) == 1);
        for (;;) pause(); // until killed
    });
    close(ready[1]);
    auto ch = l.accept_for(30s);
    CHECK(ch.has_value());
    auto out = path("assoc-src.out");
    int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    auto a = zcio::splice(std::move(*ch), fd);
    close(fd);
    CHECK(a.source_label() == "channel");
    auto c = a.run(size);
    CHECK(c.error == 0 && c.moved == size && !c.eof);
    CHECK(is_stream(out, size));
    char s = 0;
    CHECK(read(ready[0], &s, 1) == 1);
    close(ready[0]);
    kill(peer, SIGKILL);
    CHECK(wait_peer(peer) == 128 + SIGKILL);
    c = a.run(zcio::increment_infinite);
    CHECK(c.eof && c.moved == 0);
}

/// Asynchronous increments with the quench hook and the completion
/// callback: a file through `count` into a pipe a peer holds full until told.
void assoc_async_quench_and_modules() {
    const std::uint64_t size = 4u << 20;
    int fd = stream_file(path("q.src"), size);
    int data[2], go[2], quench_note[2];
    CHECK(pipe2(data, O_CLOEXEC) == 0 && pipe2(go, O_CLOEXEC) == 0 && pipe2(quench_note, O_CLOEXEC) == 0);
    // One block of the buffer path (256 KiB) fills the pipe exactly: the
    // next block finds it full (a block larger than the room left would
    // just wait in its write, unquenched).
    CHECK(fcntl(data[1], F_SETPIPE_SZ, 256 << 10) == 256 << 10);
    pid_t peer = spawn([&] {
        close(data[1]);
        close(go[1]);
        char x;
        CHECK(read(go[0], &x, 1) == 1);
        std::vector<unsigned char> b(1 << 16);
        std::uint64_t at = 0;
        ssize_t n;
        while ((n = read(data[0], b.data(), b.size())) > 0) {
            CHECK(fnv_stream(1, b.data(), static_cast<std::size_t>(n), at) != 0);
            at += static_cast<std::uint64_t>(n);
        }
        CHECK(n == 0 && at == size);
    });
    close(data[0]);
    close(go[0]);
    auto a = zcio::splice(fd, data[1]);
    close(fd);
    close(data[1]); // the association has its own
    a.push("count");
    CHECK(a.status().modules == 1 && a.status().mover == ZCIO_MOVER_BUFFER);
    std::vector<bool> events; // written on the worker, read after wait()
    a.on_quench([&](bool q) {
        events.push_back(q);
        if (q && events.size() == 1) CHECK(write(quench_note[1], "q", 1) == 1);
    });
    int completions = 0;
    a.on_complete([&](const zcio::completion &c) -> std::optional<std::uint64_t> {
        completions++;
        CHECK(c.eof);
        return std::nullopt;
    });
    a.start();
    CHECK_THROWS_KIND(a.push("count"), zcio::error_kind::busy);
    CHECK(!a.try_wait().has_value());
    struct pollfd p{quench_note[0], POLLIN, 0};
    CHECK(poll(&p, 1, 30'000) == 1); // the sink filled: quenched
    CHECK(write(go[1], "g", 1) == 1);
    close(go[1]);
    auto c = a.wait_for(60s);
    CHECK(c.has_value() && c->eof && c->moved == size && c->error == 0);
    CHECK(completions == 1);
    CHECK(!events.empty() && events.front() && !events.back());
    for (std::size_t i = 1; i < events.size(); i++) CHECK(events[i] != events[i - 1]);
    auto stats = a.module_stats();
    CHECK(stats.rfind("count ", 0) == 0 && stats.find("bytes=" + std::to_string(size)) != std::string::npos);
    CHECK(a.control("count", "stats").find("bytes=" + std::to_string(size)) != std::string::npos);
    CHECK(a.pop());
    CHECK(!a.pop());
    a.finish();
    auto fin = a.close(); // closes the pipe: the peer sees the end
    CHECK(fin.moved == size && fin.eof);
    check_peer(peer);
    close(quench_note[0]);
    close(quench_note[1]);
}

/// cp, module names, specs, and errors: kinds, a callback's exception.
void assoc_cp_names_and_errors() {
    auto names = zcio::module_names();
    CHECK(std::is_sorted(names.begin(), names.end()));
    CHECK(std::find(names.begin(), names.end(), "count") != names.end());
    CHECK(std::find(names.begin(), names.end(), "crc32c") != names.end());
    const std::uint64_t size = (1u << 20) + 5;
    auto src = path("cp.src"), dst = path("cp.dst"), dst2 = path("cp.dst2");
    close(stream_file(src, size));
    auto st = zcio::cp(src, dst, {"crc32c", "count"});
    CHECK(st.moved == size && st.modules == 2);
    CHECK(is_stream(dst, size));
    CHECK_THROWS_KIND(zcio::cp(src, dst2, {"nosuchmodule"}), zcio::error_kind::not_found);
    CHECK_THROWS_KIND(zcio::cp(src, src), zcio::error_kind::invalid_input);
    CHECK_THROWS_KIND(zcio::splice("/nonexistent/zcio-src", dst2), zcio::error_kind::not_found);
    CHECK_THROWS_KIND(zcio::splice(-1, 1), zcio::error_kind::os);
    CHECK_THROWS_KIND(zcio::load_module("/nonexistent/libx.so"), zcio::error_kind::module);
    {
        auto a = zcio::splice(src, dst2);
        CHECK(a.source_label() == src && a.sink_label() == dst2);
        CHECK_THROWS_KIND(a.push("count:bogus=1"), zcio::error_kind::invalid_input);
        CHECK_THROWS_KIND(a.wait_for(0ms), zcio::error_kind::os); // nothing to wait for: ECHILD
        a.on_complete([](const zcio::completion &) -> std::optional<std::uint64_t> {
            throw std::runtime_error("from the callback");
        });
        a.start(1000);
        bool thrown = false;
        try {
            (void)a.wait();
        } catch (const std::runtime_error &e) {
            thrown = std::string(e.what()) == "from the callback";
        }
        CHECK(thrown);
        a.on_complete(nullptr);
        auto c = a.run();
        CHECK(c.eof && c.moved == size - 1000);
    } // destroyed: closed
    CHECK(is_stream(dst2, size));
    {
        auto a = zcio::splice(src, path("cp.dst3"));
        a.on_quench([](bool) {});
        a = zcio::splice(src, path("cp.dst4")); // the first closes, then its callbacks go
        auto b = std::move(a);
        CHECK_THROWS_KIND(a.on_quench(nullptr), zcio::error_kind::invalid_input);
        CHECK_THROWS_KIND(a.status(), zcio::error_kind::invalid_input);
        CHECK(b.run().moved == size);
    }
    CHECK(is_stream(path("cp.dst4"), size));
    zcio::channel empty = [&] {
        auto sock = path("assoc-e.sock");
        auto l = zcio::listener::bind(sock);
        pid_t peer = spawn([&] { (void)zcio::channel::connect(sock); });
        auto ch = l.accept_for(30s);
        CHECK(ch.has_value());
        check_peer(peer);
        return std::move(*ch);
    }();
    // Taken over also when the call fails (ASan: freed once).
    CHECK_THROWS_KIND(zcio::splice(std::move(empty), -1), zcio::error_kind::os);
    CHECK(empty.native_handle() == nullptr);
}

// ------------------------------------------------- channel configuration

/// Every field of channel_config: the defaults are C's, a configuration
/// comes back from config() as set, on both ends of a connection across
/// processes and of a pair, and a value out of range is refused.
void channel_config_round_trip() {
    zcio_channel_config c;
    zcio_channel_config_init(&c);
    auto d = zcio::channel_config{}.to_c();
    CHECK(d.size == c.size);
    CHECK(zcio::channel_config::from_c(d) == zcio::channel_config::from_c(c));
    CHECK(zcio::channel_config::from_c(c) == (zcio::channel_config{.spin = std::chrono::microseconds(c.spin_us)}));

    const zcio::channel_config cfg{
        .send_timeout = 20s,
        .recv_timeout = 40s,
        .connect_timeout = 30s,
        .accept_timeout = 50s,
        .ring_entries = 64,
        .notice_entries = 128,
        .max_in_flight = 100,
        .max_bytes_in_flight = 1 << 20,
        .populate = false,
        .liveness_interval = 25ms,
        .max_region_len = std::uint64_t{1} << 30,
        .lane_slots = 8,
        .lane_slot_size = 256,
        .notify = zcio::notify_mode::defer,
        .wake_batch = 4,
        .max_age = 500us,
        .spin = 0us,
        .full = zcio::full_policy::fail,
        .hold_limit = 60s,
        .hold_expiry = zcio::hold_expiry_action::reclaim,
        .futile_wake_limit = 16,
    };
    auto sock = path("config.sock");
    auto l = zcio::listener::bind(sock, cfg);
    pid_t peer = spawn([&] {
        auto ch = zcio::channel::connect(sock, cfg);
        CHECK(ch.config() == cfg);
        ch.send_copy(as_bytes("configured"));
    });
    auto ch = *l.accept_for(30s);
    CHECK(ch.config() == cfg); // an accepted channel has its listener's
    auto m = ch.recv_for(30s);
    CHECK(m && as_string(m->bytes()) == "configured");
    check_peer(peer);

    // A pair, with an unbounded wait.
    auto forever_cfg = cfg;
    forever_cfg.send_timeout = zcio::forever;
    auto [a, b] = zcio::channel::pair(forever_cfg);
    CHECK(a.config() == forever_cfg && b.config() == forever_cfg);

    // Out of range: refused by every call that takes it, with what is allowed.
    const zcio::channel_config bad{.ring_entries = 3};
    CHECK_THROWS_KIND(zcio::listener::bind(path("bad.sock"), bad), zcio::error_kind::invalid_input);
    CHECK_THROWS_KIND(zcio::channel::connect(sock, bad), zcio::error_kind::invalid_input);
    CHECK_THROWS_KIND(zcio::channel::pair(bad), zcio::error_kind::invalid_input);
    CHECK_THROWS_KIND(zcio::channel::pair({.max_in_flight = 0}), zcio::error_kind::invalid_input);
    CHECK_THROWS_KIND(zcio::channel::pair({.liveness_interval = 0ms}), zcio::error_kind::invalid_input);
    try {
        (void)zcio::channel::pair({.wake_batch = 0});
        CHECK(false);
    } catch (const zcio::error &e) {
        CHECK(e.kind() == zcio::error_kind::invalid_input && !e.detail().empty());
    }
}

/// The sender's caps are applied: at max_in_flight slices held by the peer a
/// try_send gives the message back, and under full_policy::fail a send fails
/// at once (would_block) instead of waiting its bound; once the peer releases
/// them the send goes through.
void channel_config_applied() {
    auto sock = path("caps.sock");
    // Slices lent (no small-message slots), at most 4 with the peer, never waiting.
    const zcio::channel_config cfg{.max_in_flight = 4, .lane_slots = 0, .full = zcio::full_policy::fail};
    auto l = zcio::listener::bind(sock, cfg);
    signal_pipe held, go, released;
    pid_t peer = spawn([&] {
        auto ch = zcio::channel::connect(sock);
        std::vector<zcio::message> kept;
        for (int i = 0; i < 4; i++) {
            auto m = ch.recv_for(30s);
            CHECK(m && as_string(m->bytes()) == "m" + std::to_string(i));
            kept.push_back(std::move(*m));
        }
        held.post();
        go.await();
        kept.clear(); // released: deallocation notices ...
        ch.flush();   // ... published now
        released.post();
        auto last = ch.recv_for(30s);
        CHECK(last && as_string(last->bytes()) == "fifth");
    });
    auto ch = *l.accept_for(30s);
    CHECK(ch.config().max_in_flight == 4);
    zcio::pool pool("caps", 1 << 20, 4);
    auto msg = [&](const std::string &s) {
        auto b = pool.alloc(64);
        fill(b, s);
        return std::move(b).freeze();
    };
    for (int i = 0; i < 4; i++) CHECK(!ch.try_send(msg("m" + std::to_string(i))).has_value());
    held.await();
    auto back = ch.try_send(msg("fifth")); // the peer holds 4
    CHECK(back.has_value() && as_string(back->bytes()) == "fifth");
    try {
        ch.send(std::move(*back)); // full_policy::fail: no wait for the bound
        CHECK(false);
    } catch (zcio::send_error &e) {
        CHECK(e.kind() == zcio::error_kind::would_block);
        back = e.take_message();
    }
    CHECK(back.has_value() && as_string(back->bytes()) == "fifth");
    CHECK(ch.stats().send_would_block >= 2);
    go.post();
    released.await();
    CHECK(ch.reclaim() == 4);
    CHECK(!ch.try_send(std::move(*back)).has_value());
    check_peer(peer);
}

/// An access policy: a process whose uid and gid it does not name is refused
/// (connect and accept throw permission_denied) and the listener stays
/// usable; one whose effective gid it names is admitted.
void access_policy_refuses() {
    const std::uint32_t me = geteuid();
    auto sock = path("access.sock");
    auto l = zcio::listener::bind(sock, {.connect_timeout = 60s}, zcio::access_policy{.uids = {me + 1}});
    for (int round = 0; round < 2; round++) {
        pid_t peer = spawn([&] {
            CHECK_THROWS_KIND(zcio::channel::connect(sock, {.connect_timeout = 60s}), zcio::error_kind::permission_denied);
        });
        CHECK_THROWS_KIND(l.accept_for(60s), zcio::error_kind::permission_denied);
        check_peer(peer);
    }
    auto sock2 = path("access-gid.sock");
    auto l2 = zcio::listener::bind(sock2, {}, zcio::access_policy{.uids = {me + 1}, .gids = {getegid()}});
    pid_t peer = spawn([&] {
        auto ch = zcio::channel::connect(sock2);
        CHECK(ch.peer().pid == getppid());
        ch.send_copy(as_bytes("admitted"));
    });
    auto ch = *l2.accept_for(30s);
    CHECK(ch.peer().pid == peer && ch.peer().uid == me && ch.peer().gid == getegid());
    auto m = ch.recv_for(30s);
    CHECK(m && as_string(m->bytes()) == "admitted");
    check_peer(peer);
}

/// A hostile peer that keeps every buffer it was lent: a send at the cap
/// waits its whole bound, and the fault is recorded (faults(), health() with
/// its text); the peer killed: the socket hangs up, check_peer() finds it
/// gone and a receive says disconnected.
void channel_faults_hostile_peer() {
    auto sock = path("faults.sock");
    const zcio::channel_config cfg{.max_in_flight = 2, .lane_slots = 0};
    auto l = zcio::listener::bind(sock, cfg);
    signal_pipe held;
    pid_t peer = spawn([&] {
        auto ch = zcio::channel::connect(sock);
        auto a = ch.recv_for(30s);
        auto b = ch.recv_for(30s);
        CHECK(a && b);
        held.post();
        pause(); // holds both for good, until killed
    });
    auto ch = *l.accept_for(30s);
    CHECK(!ch.health().has_value() && ch.faults().empty());
    CHECK(ch.check_peer() && !ch.is_disconnected());
    zcio::pool pool("faults", 1 << 20, 4);
    auto msg = [&](const std::string &s) {
        auto b = pool.alloc(64);
        fill(b, s);
        return std::move(b).freeze();
    };
    ch.send(msg("one"));
    ch.send(msg("two"));
    held.await();
    auto back = ch.send_for(msg("three"), 20ms); // at the cap, the peer releases nothing
    CHECK(back.has_value());
    auto f = ch.faults();
    CHECK(f.size() == 1 && f[0].kind == zcio::fault_kind::not_releasing && f[0].value == 2);
    auto h = ch.health();
    CHECK(h && h->kind == zcio::fault_kind::not_releasing && h->value == 2 && !h->message.empty());
    CHECK(std::string(zcio::to_string(h->kind)) == "NotReleasing");
    CHECK(ch.expire_holds() == 0); // no hold limit
    kill(peer, SIGKILL);
    CHECK(wait_peer(peer) == 128 + SIGKILL);
    struct pollfd p {ch.socket(), POLLIN, 0};
    CHECK(poll(&p, 1, 60'000) == 1); // the set-up socket hung up
    CHECK(!ch.check_peer());         // gone: what it held is released
    CHECK(ch.is_disconnected());
    CHECK_THROWS_KIND(ch.recv_for(60s), zcio::error_kind::disconnected);
    CHECK(!ch.faults().empty()); // the record stays
}

/// Channel::pair and the remaining controls: peer credentials, the socket,
/// share_pool, flush, trust_peer (received messages no longer volatile).
void channel_pair_controls() {
    auto [a, b] = zcio::channel::pair({.lane_slots = 0});
    CHECK(a.peer().pid == getpid() && b.peer().uid == geteuid());
    CHECK(a.socket() >= 0 && b.socket() >= 0);
    zcio::pool pool("pair", 1 << 20, 2);
    a.share_pool(pool);
    auto send = [&](const std::string &s) {
        auto buf = pool.alloc(64);
        fill(buf, s);
        a.send(std::move(buf).freeze());
        a.flush();
    };
    send("untrusted");
    auto m = b.recv_for(30s);
    CHECK(m && as_string(m->bytes()) == "untrusted" && m->is_volatile());
    CHECK(!b.is_peer_trusted());
    b.trust_peer();
    CHECK(b.is_peer_trusted());
    send("trusted");
    auto t = b.recv_for(30s);
    CHECK(t && as_string(t->bytes()) == "trusted" && !t->is_volatile());
    m.reset();
    t.reset();
    b.flush();
    CHECK(a.expire_holds() == 0);
    CHECK(a.check_peer() && !a.is_disconnected());
    std::optional<zcio::channel> gone(std::move(b));
    gone.reset(); // one end closed: the other finds its peer gone
    CHECK(!a.check_peer() && a.is_disconnected());
}

const test tests[] = {
    {"channel_round_trip", channel_round_trip},
    {"lane_round_trip", lane_round_trip},
    {"ring_blocks", ring_blocks},
    {"ring_stream_and_fd", ring_stream_and_fd},
    {"typed_round_trip", typed_round_trip},
    {"typed_interop_with_c", typed_interop_with_c},
    {"errors_carry_kind", errors_carry_kind},
    {"send_error_returns_message", send_error_returns_message},
    {"try_send_gives_message_back", try_send_gives_message_back},
    {"raii_frees_everything", raii_frees_everything},
    {"peer_killed", peer_killed},
    {"ring_every_layout", ring_every_layout},
    {"ring_reserve_commit", ring_reserve_commit},
    {"ring_tags_and_gather", ring_tags_and_gather},
    {"ring_index_splice", ring_index_splice},
    {"ring_list_and_stat", ring_list_and_stat},
    {"typed_flex_round_trip", typed_flex_round_trip},
    {"rendezvous_call", rendezvous_call},
    {"rendezvous_recv_any", rendezvous_recv_any},
    {"rendezvous_descriptors", rendezvous_descriptors},
    {"rendezvous_timeouts", rendezvous_timeouts},
    {"rendezvous_peer_killed", rendezvous_peer_killed},
    {"rendezvous_event_loop", rendezvous_event_loop},
    {"proxy_many_sends", proxy_many_sends},
    {"proxy_partner_killed", proxy_partner_killed},
    {"timeouts_convert", timeouts_convert},
    {"semantic_round_trip", semantic_round_trip},
    {"spin_policy_and_cost_model", spin_policy_and_cost_model},
    {"assoc_file_to_peer_channel", assoc_file_to_peer_channel},
    {"assoc_peer_channel_killed", assoc_peer_channel_killed},
    {"assoc_async_quench_and_modules", assoc_async_quench_and_modules},
    {"assoc_cp_names_and_errors", assoc_cp_names_and_errors},
    {"channel_config_round_trip", channel_config_round_trip},
    {"channel_config_applied", channel_config_applied},
    {"access_policy_refuses", access_policy_refuses},
    {"channel_faults_hostile_peer", channel_faults_hostile_peer},
    {"channel_pair_controls", channel_pair_controls},
    {"msg_split_clip_join", msg_split_clip_join},
    {"pool_config_and_reclaim", pool_config_and_reclaim},
    {"forward_between_children", forward_between_children},
    {"misc_calls", misc_calls},
};

} // namespace

int main(int argc, char **argv) { return run_tests("test_zcio_cpp", argc, argv, tests); }
