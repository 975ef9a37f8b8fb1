// Tests of the C++ bridge API (zcio::bridge, include/zcio.hpp under ZCIO_BRIDGE; a
// library built with `scripts/build-c --bridge`), across real processes over
// tcp/127.0.0.1 with multicast scouting off, as c/tests/test_bridge.c does for C:
// a ring exported by one process and imported into a ring by another, blocks
// byte-exact to the end of the stream; an exporter killed by SIGKILL ends the
// importer with a failure (no hang); bad arguments throw.
//
//   test_bridge_cpp [TEST...]        (no argument: every test)
//
// Each test runs in a forked child under a watchdog (alarm); peers are forked from
// it and waited for with a bound. Rings live in a fresh directory (ZCIO_RING_DIR).
// The exporter listens on port 0 and reports the endpoint it got on a pipe; each
// step waits for the previous one's evidence (a line on a pipe, a consumer), never
// for a time.
#include "harness.hpp"

#ifndef ZCIO_BRIDGE
#error "build against a library with the bridge: scripts/build-c --bridge (its .pc defines ZCIO_BRIDGE)"
#endif

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace std::chrono_literals;

namespace {

std::size_t blk_len(std::uint64_t i) { return 1 + static_cast<std::size_t>((i * 53 + 3) % 3000); }
std::byte blk_byte(std::uint64_t i, std::size_t k) { return static_cast<std::byte>(i * 29 + k * 13 + 5); }
std::vector<std::byte> block(std::uint64_t i) {
    std::vector<std::byte> b(blk_len(i));
    for (std::size_t k = 0; k < b.size(); k++) b[k] = blk_byte(i, k);
    return b;
}

/// One line from `fd` (without the newline), waiting at most 30 s for it.
std::string read_line(int fd) {
    std::string s;
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 30'000) <= 0) throw failure{"no line from the peer"};
        char c;
        if (read(fd, &c, 1) != 1) throw failure{"the peer closed its pipe"};
        if (c == '\n') return s;
        s += c;
    }
}

// ------------------------------------------------------------------ peers

// Export ring `ring` to Zenoh key `key`, listening on a free port of 127.0.0.1.
void exporter(const std::string &ring, const std::string &key) {
    zcio::bridge_session s;
    s.listen = {"tcp/127.0.0.1:0"};
    auto b = zcio::bridge::export_start("ring:" + ring, key, s);
    auto eps = b.endpoints(); // the port 0 resolved: "tcp/127.0.0.1:40123"
    printf("ready %s\n", eps.at(0).c_str());
    fflush(stdout);
    auto end = b.wait_for(60s); // the ring's producer closes it: the end of the stream
    CHECK(end && end->ok());
    CHECK(b.counters().samples > 0);
}

// Import `key` into ring `ring` (created by the import), connecting to `endpoint`;
// read `n` blocks byte-exact. eos: then the end of the stream on both sides;
// killed: print "got", then the bridge fails (disconnected) and the reader sees
// the stream cut (producer_failed).
void importer(const std::string &key, const std::string &endpoint, const std::string &ring, std::uint64_t n,
              bool eos) {
    // The ring and its consumer first: attached before the import writes its first block,
    // the consumer sees every block (one attached after could start past the first ones).
    zcio::ring_consumer c(ring, zcio::ring_options{.size = 1 << 20, .layout = zcio::ring_layout::blocks});
    zcio::bridge_session s;
    s.connect = {endpoint};
    s.connect_timeout = 30s; // no peer by then: the bridge ends with timed_out
    s.grace = 500ms;         // the exporter's liveliness token gone this long: it vanished
    auto b = zcio::bridge::import_start(key, "ring:" + ring, s);
    std::vector<std::byte> buf(4096);
    for (std::uint64_t i = 0; i < n; i++) {
        auto r = c.read_for(buf, 30s);
        CHECK(r);
        auto want = block(i);
        CHECK(*r == want.size());
        CHECK(std::memcmp(buf.data(), want.data(), *r) == 0);
    }
    if (eos) {
        CHECK(c.read_for(buf, 30s) == std::optional<std::size_t>(0));
        auto end = b.wait_for(60s);
        CHECK(end && end->ok());
        auto cn = b.counters();
        CHECK(cn.samples == n && cn.gaps == 0);
    } else {
        printf("got\n");
        fflush(stdout);
        auto end = b.wait_for(60s); // never a hang: the exporter's death ends it
        CHECK(end && end->ended == zcio::bridge_status::how::failed);
        CHECK(end->kind() == zcio::error_kind::disconnected);
        CHECK_THROWS_KIND(c.read_for(buf, 30s), zcio::error_kind::producer_failed);
    }
}

struct pair {
    pid_t ex, im;
    int im_out;
};

pair start_pair(const std::string &ring, const std::string &key, const std::string &dst, std::uint64_t n,
                bool eos) {
    int ep[2], ip[2];
    CHECK(pipe(ep) == 0 && pipe(ip) == 0);
    pid_t ex = spawn(ep[1], [&] { exporter(ring, key); });
    close(ep[1]);
    std::string line = read_line(ep[0]);
    close(ep[0]);
    CHECK(line.rfind("ready ", 0) == 0);
    std::string endpoint = line.substr(6);
    pid_t im = spawn(ip[1], [&] { importer(key, endpoint, dst, n, eos); });
    close(ip[1]);
    return {ex, im, ip[0]};
}

zcio::ring_producer source(const std::string &name) {
    return zcio::ring_producer(name, zcio::ring_options{.layout = zcio::ring_layout::blocks});
}

// ------------------------------------------------------------------ tests

void export_import() {
    const std::uint64_t n = 500;
    auto p = source("bsrc");
    auto [ex, im, im_out] = start_pair("bsrc", "zcio/cpptest/eos", "bdst", n, true);
    CHECK(p.wait_consumers(1, 30s) == 1); // the exporter reads from the newest block
    for (std::uint64_t i = 0; i < n; i++) CHECK(p.write(block(i)) == blk_len(i));
    { auto done = std::move(p); } // closing the ring: the end of the stream
    CHECK(wait_peer(im) == 0);
    CHECK(wait_peer(ex) == 0);
    close(im_out);
}

void exporter_killed() {
    auto p = source("ksrc");
    auto [ex, im, im_out] = start_pair("ksrc", "zcio/cpptest/killed", "kdst", 20, false);
    CHECK(p.wait_consumers(1, 30s) == 1);
    for (std::uint64_t i = 0; i < 20; i++) CHECK(p.write(block(i)) == blk_len(i));
    CHECK(read_line(im_out) == "got");
    kill(ex, SIGKILL);
    CHECK(wait_peer(ex) == 128 + SIGKILL);
    CHECK(wait_peer(im) == 0);
    close(im_out);
}

void bridge_errors() {
    using zcio::error_kind;
    zcio::bridge_session s;
    CHECK_THROWS_KIND(zcio::bridge::export_start("file:x", "k", s), error_kind::invalid_input);
    CHECK_THROWS_KIND(zcio::bridge::export_start("ring:x", "a/*", s), error_kind::invalid_input);
    CHECK_THROWS_KIND(zcio::bridge::export_start("ring:no-such-ring", "k", s), error_kind::not_found);
    s.listen = {"nonsense"};
    CHECK_THROWS_KIND(zcio::bridge::export_start("ring:x", "k", s), error_kind::invalid_input);
    s = {};
    CHECK_THROWS_KIND(zcio::bridge::import_start("k", "pipe:x", s), error_kind::invalid_input);
    s.grace = -1ms;
    CHECK_THROWS_KIND(zcio::bridge::import_start("k", "ring:x", s), error_kind::invalid_input);
    s = {};
    s.connect_timeout = 0ms;
    CHECK_THROWS_KIND(zcio::bridge::import_start("k", "ring:x", s), error_kind::invalid_input);

    // An import that reaches nobody within its connect timeout ends timed_out;
    // stop() ends a running bridge as stopped.
    s = {};
    s.connect_timeout = 300ms;
    auto lonely = zcio::bridge::import_start("zcio/cpptest/nobody", "ring:lonely", s);
    auto end = lonely.wait_for(30s);
    CHECK(end && end->ended == zcio::bridge_status::how::failed && end->kind() == error_kind::timed_out);

    auto b = zcio::bridge::import_start("zcio/cpptest/stop", "ring:stopped", {});
    CHECK(!b.try_wait());          // it runs
    CHECK(b.endpoints().empty());  // it listens nowhere
    b.stop();
    end = b.wait_for(30s);
    CHECK(end && end->ended == zcio::bridge_status::how::stopped);
    b.stop(); // again: nothing to do

    // A moved-from handle is empty: its calls throw invalid_input, its destructor does nothing.
    auto moved = std::move(b);
    CHECK_THROWS_KIND(b.counters(), error_kind::invalid_input);
    CHECK_THROWS_KIND(b.wait_for(0ms), error_kind::invalid_input);
    CHECK(moved.native_handle() != nullptr);
}

const test tests[] = {
    {"export_import", export_import},
    {"exporter_killed", exporter_killed},
    {"bridge_errors", bridge_errors},
};

} // namespace

int main(int argc, char **argv) { return run_tests("test_bridge_cpp", argc, argv, tests); }
