// The C-vs-C++ benchmark behind scripts/bench-cpp: the same loops written
// against the C API (zcio.h) and the C++ API (zcio.hpp), run across two
// processes (forked, producer/pinger pinned to CPU 0, consumer/echoer to
// CPU 1), interleaved in one invocation: every round runs each shape with
// both APIs back to back, in alternating order; medians over the rounds.
//
//   ring_bench [--quick] [--rounds N] [--only SHAPE] [--out FILE.json] [--svg FILE.svg]
//
// --only runs the shapes whose label contains SHAPE (e.g. "64 B / peek").
//
// Shapes: a block ring (1 MiB) streaming 64 B and 4 KiB messages, read by
// copy and in place (throughput; p50 = the median time per message over
// batches of 256), and a channel ping-pong of 64 B pool buffers sent by
// reference (p50 = the median round trip; throughput = round trips/s).
// Target: C++ within 5% of C (median of the paired per-round throughput
// ratios >= 0.95).
#include <zcio.hpp>

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

double now_ns() {
    return std::chrono::duration<double, std::nano>(clock_type::now().time_since_epoch()).count();
}

struct shape {
    enum kind_t { ring, chan } kind;
    std::size_t msg;
    bool peek;
    std::size_t count;
    std::string label() const {
        std::string size = msg >= 1024 ? std::to_string(msg / 1024) + " KiB" : std::to_string(msg) + " B";
        if (kind == chan) return "channel ping-pong " + size + " (pool buffer by reference)";
        return "ring 1 MiB / " + size + (peek ? " / peek" : " / copy");
    }
};

/// What the measuring process reports through a pipe.
struct report {
    double total_ns;   // first message to last
    double p50_ns;     // per message (ring) or per round trip (channel)
    std::uint64_t ok;  // 1 if every message checked out
};

constexpr std::size_t batch = 256;
constexpr std::size_t ring_size = 1 << 20;

[[noreturn]] void die(const char *what) {
    std::fprintf(stderr, "ring_bench: %s (%s)\n", what, zcio_last_error());
    _exit(1);
}

void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    (void)sched_setaffinity(0, sizeof set, &set);
}

double median(std::vector<double> v) {
    if (v.empty()) return NAN;
    std::sort(v.begin(), v.end());
    std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void put_report(int fd, const report &r) {
    if (write(fd, &r, sizeof r) != static_cast<ssize_t>(sizeof r)) _exit(1);
}
void signal_ready(int fd) {
    char c = 'r';
    if (write(fd, &c, 1) != 1) _exit(1);
}

// --------------------------------------------------- ring: the C API

void ring_producer_c(const std::string &name, const shape &s, int ready) {
    zcio_ring *r = nullptr;
    if (zcio_ring_open(name.c_str(), ZCIO_O_WRONLY | ZCIO_O_CREAT | ZCIO_O_EXCL | ZCIO_O_BLOCKS, 0600, ring_size,
                       &r) < 0)
        die("open");
    signal_ready(ready);
    if (zcio_ring_wait_consumers(r, 1, 30000) < 1) die("no consumer");
    std::vector<std::byte> buf(s.msg, std::byte{7});
    for (std::uint64_t k = 0; k < s.count; k++) {
        std::memcpy(buf.data(), &k, 8);
        if (zcio_ring_write(r, buf.data(), buf.size()) != static_cast<ssize_t>(s.msg)) die("write");
    }
    zcio_ring_close(r);
}

void ring_consumer_c(const std::string &name, const shape &s, int out) {
    zcio_ring *r = nullptr;
    if (zcio_ring_open(name.c_str(), ZCIO_O_RDONLY, 0600, 0, &r) < 0) die("open");
    std::vector<std::byte> buf(s.msg);
    std::vector<double> per_msg;
    per_msg.reserve(s.count / batch + 1);
    report rep{0, 0, 1};
    double t0 = 0, tb = 0;
    for (std::uint64_t k = 0; k < s.count; k++) {
        std::uint64_t seq;
        if (s.peek) {
            const void *data;
            std::size_t len;
            if (zcio_ring_peek(r, SIZE_MAX, &data, &len) != 1) die("peek");
            std::memcpy(&seq, data, 8);
            if (zcio_ring_release(r) != 0) die("release");
        } else {
            if (zcio_ring_read(r, buf.data(), buf.size()) != static_cast<ssize_t>(s.msg)) die("read");
            std::memcpy(&seq, buf.data(), 8);
        }
        if (seq != k) rep.ok = 0;
        if (k == 0) t0 = tb = now_ns();
        else if (k % batch == 0) {
            double t = now_ns();
            per_msg.push_back((t - tb) / batch);
            tb = t;
        }
    }
    rep.total_ns = now_ns() - t0;
    if (zcio_ring_read(r, buf.data(), buf.size()) != 0) rep.ok = 0; // the end of the stream
    zcio_ring_close(r);
    rep.p50_ns = median(per_msg);
    put_report(out, rep);
}

// ------------------------------------------------- ring: the C++ API

void ring_producer_cpp(const std::string &name, const shape &s, int ready) {
    zcio::ring_producer p(name, {.size = ring_size, .layout = zcio::ring_layout::blocks, .exclusive = true});
    signal_ready(ready);
    if (p.wait_consumers(1, std::chrono::seconds(30)) < 1) die("no consumer");
    std::vector<std::byte> buf(s.msg, std::byte{7});
    for (std::uint64_t k = 0; k < s.count; k++) {
        std::memcpy(buf.data(), &k, 8);
        if (p.write(buf) != s.msg) die("write");
    }
}

void ring_consumer_cpp(const std::string &name, const shape &s, int out) {
    zcio::ring_consumer c(name);
    std::vector<std::byte> buf(s.msg);
    std::vector<double> per_msg;
    per_msg.reserve(s.count / batch + 1);
    report rep{0, 0, 1};
    double t0 = 0, tb = 0;
    for (std::uint64_t k = 0; k < s.count; k++) {
        std::uint64_t seq;
        if (s.peek) {
            zcio::ring_peek pk = c.peek();
            std::memcpy(&seq, pk.bytes().data(), 8);
            if (!std::move(pk).release()) die("lapped");
        } else {
            if (c.read(buf) != s.msg) die("read");
            std::memcpy(&seq, buf.data(), 8);
        }
        if (seq != k) rep.ok = 0;
        if (k == 0) t0 = tb = now_ns();
        else if (k % batch == 0) {
            double t = now_ns();
            per_msg.push_back((t - tb) / batch);
            tb = t;
        }
    }
    rep.total_ns = now_ns() - t0;
    if (c.read(buf) != 0) rep.ok = 0;
    rep.p50_ns = median(per_msg);
    put_report(out, rep);
}

// ------------------------------------------------ channel: the C API

void chan_pinger_c(const std::string &sock, const shape &s, int ready, int out) {
    zcio_listener *l = nullptr;
    if (zcio_listen(sock.c_str(), &l) < 0) die("listen");
    signal_ready(ready);
    zcio_channel *ch = nullptr;
    if (zcio_accept(l, 30000, &ch) < 0) die("accept");
    zcio_pool *pool = nullptr;
    if (zcio_pool_create("bench", 1 << 20, 4, &pool) < 0) die("pool");
    std::vector<double> rtt;
    rtt.reserve(s.count);
    report rep{0, 0, 1};
    double t0 = now_ns();
    for (std::uint64_t k = 0; k < s.count; k++) {
        double t = now_ns();
        zcio_buf *b = nullptr;
        if (zcio_buf_alloc(pool, s.msg, &b) < 0) die("alloc");
        std::memcpy(zcio_buf_data(b), &k, 8);
        if (zcio_send(ch, b, -1) < 0) die("send");
        zcio_msg *m = nullptr;
        if (zcio_recv(ch, -1, &m) < 0) die("recv");
        std::uint64_t seq = 0;
        if (zcio_msg_read(m, 0, &seq, 8) != 8 || seq != k) rep.ok = 0;
        zcio_msg_release(m);
        rtt.push_back(now_ns() - t);
    }
    rep.total_ns = now_ns() - t0;
    rep.p50_ns = median(rtt);
    zcio_pool_destroy(pool);
    zcio_channel_close(ch);
    zcio_listener_close(l);
    put_report(out, rep);
}

void chan_echoer_c(const std::string &sock, const shape &s) {
    zcio_channel *ch = nullptr;
    if (zcio_connect(sock.c_str(), 30000, &ch) < 0) die("connect");
    zcio_pool *pool = nullptr;
    if (zcio_pool_create("bench", 1 << 20, 4, &pool) < 0) die("pool");
    for (std::uint64_t k = 0; k < s.count; k++) {
        zcio_msg *m = nullptr;
        if (zcio_recv(ch, -1, &m) < 0) die("recv");
        std::uint64_t seq = 0;
        if (zcio_msg_read(m, 0, &seq, 8) != 8) die("read");
        zcio_msg_release(m);
        zcio_buf *b = nullptr;
        if (zcio_buf_alloc(pool, s.msg, &b) < 0) die("alloc");
        std::memcpy(zcio_buf_data(b), &seq, 8);
        if (zcio_send(ch, b, -1) < 0) die("send");
    }
    zcio_msg *m = nullptr;
    (void)zcio_recv(ch, 30000, &m); // the pinger's close: -EPIPE
    zcio_msg_release(m);
    zcio_pool_destroy(pool);
    zcio_channel_close(ch);
}

// ---------------------------------------------- channel: the C++ API

void chan_pinger_cpp(const std::string &sock, const shape &s, int ready, int out) {
    auto l = zcio::listener::bind(sock);
    signal_ready(ready);
    auto ch = l.accept_for(std::chrono::seconds(30));
    if (!ch) die("accept");
    zcio::pool pool("bench", 1 << 20, 4);
    std::vector<double> rtt;
    rtt.reserve(s.count);
    report rep{0, 0, 1};
    double t0 = now_ns();
    for (std::uint64_t k = 0; k < s.count; k++) {
        double t = now_ns();
        zcio::buffer b = pool.alloc(s.msg);
        std::memcpy(b.data().data(), &k, 8);
        ch->send(std::move(b).freeze());
        zcio::message m = ch->recv();
        std::uint64_t seq = 0;
        if (m.read(0, std::as_writable_bytes(std::span(&seq, 1))) != 8 || seq != k) rep.ok = 0;
        rtt.push_back(now_ns() - t);
    }
    rep.total_ns = now_ns() - t0;
    rep.p50_ns = median(rtt);
    put_report(out, rep);
}

void chan_echoer_cpp(const std::string &sock, const shape &s) {
    auto ch = zcio::channel::connect(sock);
    zcio::pool pool("bench", 1 << 20, 4);
    for (std::uint64_t k = 0; k < s.count; k++) {
        std::uint64_t seq = 0;
        {
            zcio::message m = ch.recv();
            if (m.read(0, std::as_writable_bytes(std::span(&seq, 1))) != 8) die("read");
        }
        zcio::buffer b = pool.alloc(s.msg);
        std::memcpy(b.data().data(), &seq, 8);
        ch.send(std::move(b).freeze());
    }
    try {
        (void)ch.recv_for(std::chrono::seconds(30)); // the pinger's close: disconnected
    } catch (const zcio::error &) {
    }
}

// ------------------------------------------------------------ driver

/// Fork a child pinned to `cpu` running `fn`; exceptions end it with 1.
template <class F> pid_t child(int cpu, F fn) {
    std::fflush(nullptr);
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid > 0) return pid;
    alarm(300); // a hung run ends here, not never
    pin(cpu);
    try {
        fn();
    } catch (const std::exception &e) {
        std::fprintf(stderr, "ring_bench: %s\n", e.what());
        _exit(1);
    }
    _exit(0);
}

bool reap(pid_t pid) {
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) return false;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

std::string work_dir;
int seq_no = 0;

/// One run of `s` with the C API (cpp false) or the C++ API.
bool run(const shape &s, bool cpp, report &rep) {
    int ready[2], res[2];
    if (pipe(ready) || pipe(res)) die("pipe");
    std::string name = "cppbench-" + std::to_string(getpid()) + "-" + std::to_string(++seq_no);
    std::string sock = work_dir + "/" + name + ".sock";
    pid_t a, b;
    if (s.kind == shape::ring) {
        a = child(0, [&] { cpp ? ring_producer_cpp(name, s, ready[1]) : ring_producer_c(name, s, ready[1]); });
    } else {
        a = child(0, [&] {
            cpp ? chan_pinger_cpp(sock, s, ready[1], res[1]) : chan_pinger_c(sock, s, ready[1], res[1]);
        });
    }
    close(ready[1]);
    char c;
    bool ok = read(ready[0], &c, 1) == 1; // created the ring / listening
    close(ready[0]);
    if (s.kind == shape::ring) {
        b = child(1, [&] { cpp ? ring_consumer_cpp(name, s, res[1]) : ring_consumer_c(name, s, res[1]); });
    } else {
        b = child(1, [&] { cpp ? chan_echoer_cpp(sock, s) : chan_echoer_c(sock, s); });
    }
    close(res[1]);
    ok = ok && read(res[0], &rep, sizeof rep) == static_cast<ssize_t>(sizeof rep);
    close(res[0]);
    ok = reap(a) && ok;
    ok = reap(b) && ok;
    if (s.kind == shape::ring) zcio::ring_unlink(name);
    return ok && rep.ok == 1;
}

double loadavg() {
    double l = NAN;
    if (FILE *f = std::fopen("/proc/loadavg", "r")) {
        if (std::fscanf(f, "%lf", &l) != 1) l = NAN;
        std::fclose(f);
    }
    return l;
}

std::string fmt(double v, int prec) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*f", prec, v);
    return b;
}
std::string ns(double v) {
    if (v >= 1e6) return fmt(v / 1e6, 2) + " ms";
    if (v >= 1e3) return fmt(v / 1e3, 2) + " µs";
    return fmt(v, 1) + " ns";
}
std::string rate(const shape &s, double total_ns) {
    double per_s = static_cast<double>(s.count) / (total_ns / 1e9);
    if (s.kind == shape::chan) return fmt(per_s / 1e3, 1) + " k round trips/s";
    return fmt(per_s * static_cast<double>(s.msg) / 1048576.0, 0) + " MiB/s";
}

std::string svg(const std::vector<shape> &shapes, const std::vector<double> &ratio) {
    const double w = 900, h = 360, left = 60, top = 40, bottom = 80;
    double max = 1.2;
    for (double r : ratio) max = std::max(max, r);
    double plot_h = h - top - bottom;
    auto y = [&](double v) { return top + plot_h - v / max * plot_h; };
    double group = (w - left - 20) / static_cast<double>(shapes.size());
    std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"900\" height=\"360\" font-family=\"sans-serif\" "
                    "font-size=\"11\">\n<text x=\"60\" y=\"20\" font-size=\"14\">zcio: C++ API throughput / C API "
                    "throughput (median of paired rounds)</text>\n";
    for (std::size_t i = 0; i < shapes.size(); i++) {
        double x = left + static_cast<double>(i) * group + group / 4;
        s += "<rect x=\"" + fmt(x, 1) + "\" y=\"" + fmt(y(ratio[i]), 1) + "\" width=\"" + fmt(group / 2, 1) +
             "\" height=\"" + fmt(top + plot_h - y(ratio[i]), 1) + "\" fill=\"#1f77b4\"><title>" + shapes[i].label() +
             ": " + fmt(ratio[i], 3) + "x</title></rect>\n";
        std::string l = shapes[i].kind == shape::chan ? "chan " + std::to_string(shapes[i].msg) + " B"
                                                      : std::to_string(shapes[i].msg) + " B " +
                                                            (shapes[i].peek ? "peek" : "copy");
        if (shapes[i].msg >= 1024 && shapes[i].kind == shape::ring)
            l = std::to_string(shapes[i].msg / 1024) + " KiB " + (shapes[i].peek ? "peek" : "copy");
        s += "<text x=\"" + fmt(x + group / 4, 1) + "\" y=\"" + fmt(h - bottom + 16, 1) +
             "\" text-anchor=\"middle\">" + l + "</text>\n";
    }
    for (auto [v, label, dash] : {std::tuple{1.0, "1.00 (C)", ""},
                                  std::tuple{0.95, "0.95 (target)", " stroke-dasharray=\"4 3\""}}) {
        s += "<line x1=\"60\" y1=\"" + fmt(y(v), 1) + "\" x2=\"880\" y2=\"" + fmt(y(v), 1) + "\" stroke=\"#d62728\"" +
             dash + "/><text x=\"2\" y=\"" + fmt(y(v) + 4, 1) + "\">" + label + "</text>\n";
    }
    s += "<line x1=\"60\" y1=\"" + fmt(top + plot_h, 0) + "\" x2=\"880\" y2=\"" + fmt(top + plot_h, 0) +
         "\" stroke=\"black\"/>\n</svg>\n";
    return s;
}

bool write_file(const std::string &path, const std::string &text) {
    auto slash = path.rfind('/');
    if (slash != std::string::npos) {
        std::string cmd = "mkdir -p '" + path.substr(0, slash) + "'";
        if (std::system(cmd.c_str()) != 0) return false;
    }
    std::ofstream f(path);
    f << text;
    return static_cast<bool>(f);
}

} // namespace

int main(int argc, char **argv) {
    bool quick = false;
    int rounds = 0;
    std::string only; // run only the shapes whose label contains it
    std::string out = "bench-out/cpp-ring.json", svg_out = "bench-out/cpp-ring.svg";
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--quick") quick = true;
        else if (a == "--rounds" && i + 1 < argc) rounds = std::atoi(argv[++i]);
        else if (a == "--out" && i + 1 < argc) out = argv[++i];
        else if (a == "--svg" && i + 1 < argc) svg_out = argv[++i];
        else if (a == "--only" && i + 1 < argc) only = argv[++i];
        else {
            std::fprintf(stderr,
                         "usage: ring_bench [--quick] [--rounds N] [--only SHAPE] [--out FILE.json] [--svg FILE.svg]\n");
            return 2;
        }
    }
    if (rounds <= 0) rounds = quick ? 3 : 9;
    signal(SIGPIPE, SIG_IGN);
    char tmpl[] = "/tmp/zcio-cpp-bench.XXXXXX";
    if (!mkdtemp(tmpl)) die("mkdtemp");
    work_dir = tmpl;
    if (!std::getenv("ZCIO_RING_DIR")) setenv("ZCIO_RING_DIR", work_dir.c_str(), 1);

    const std::size_t scale = quick ? 8 : 1;
    std::vector<shape> shapes;
    for (bool peek : {false, true}) {
        shapes.push_back({shape::ring, 64, peek, (4u << 20) / scale});
        shapes.push_back({shape::ring, 4096, peek, (256u << 10) / scale});
    }
    shapes.push_back({shape::chan, 64, false, 40000 / scale});
    if (!only.empty())
        std::erase_if(shapes, [&](const shape &s) { return s.label().find(only) == std::string::npos; });
    if (shapes.empty()) {
        std::fprintf(stderr, "ring_bench: no shape matches --only '%s'\n", only.c_str());
        return 2;
    }

    double load_before = loadavg();
    std::fprintf(stderr,
                 "ring_bench: load average before the run: %.2f; %zu shapes x 2 APIs x %d rounds, interleaved; "
                 "producer/pinger on CPU 0, consumer/echoer on CPU 1\n",
                 load_before, shapes.size(), rounds);
    // runs[shape][api][round]
    std::vector<std::array<std::vector<report>, 2>> runs(shapes.size());
    for (int r = 0; r < rounds; r++) {
        for (std::size_t i = 0; i < shapes.size(); i++) {
            for (int k = 0; k < 2; k++) {
                bool cpp = (k + r + static_cast<int>(i)) % 2 == 1; // alternate which API goes first
                report rep{};
                if (!run(shapes[i], cpp, rep)) {
                    std::fprintf(stderr, "ring_bench: %s with the %s API failed\n", shapes[i].label().c_str(),
                                 cpp ? "C++" : "C");
                    return 1;
                }
                runs[i][cpp].push_back(rep);
            }
        }
        std::fprintf(stderr, "ring_bench: round %d of %d done\n", r + 1, rounds);
    }

    std::printf("\nzcio, C API vs C++ API (zcio.hpp): median of %d interleaved rounds, two processes\n\n", rounds);
    std::printf("| shape | count | C p50 | C++ p50 | C throughput | C++ throughput | C++ / C (paired) |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
    std::vector<double> ratios;
    std::string rows;
    bool all = true;
    for (std::size_t i = 0; i < shapes.size(); i++) {
        const auto &s = shapes[i];
        auto med = [&](int api, auto f) {
            std::vector<double> v;
            for (auto &x : runs[i][api]) v.push_back(f(x));
            return median(v);
        };
        double c_p50 = med(0, [](const report &x) { return x.p50_ns; });
        double x_p50 = med(1, [](const report &x) { return x.p50_ns; });
        double c_tot = med(0, [](const report &x) { return x.total_ns; });
        double x_tot = med(1, [](const report &x) { return x.total_ns; });
        std::vector<double> paired;
        for (int r = 0; r < rounds; r++) paired.push_back(runs[i][0][r].total_ns / runs[i][1][r].total_ns);
        double ratio = median(paired);
        ratios.push_back(ratio);
        all = all && ratio >= 0.95;
        std::printf("| %s | %zu | %s | %s | %s | %s | %.3f× |\n", s.label().c_str(), s.count, ns(c_p50).c_str(),
                    ns(x_p50).c_str(), rate(s, c_tot).c_str(), rate(s, x_tot).c_str(), ratio);
        auto per_s = [&](double tot) { return static_cast<double>(s.count) / (tot / 1e9); };
        std::string runs_c, runs_x;
        for (int r = 0; r < rounds; r++) {
            runs_c += (r ? ", " : "") + fmt(per_s(runs[i][0][r].total_ns), 1);
            runs_x += (r ? ", " : "") + fmt(per_s(runs[i][1][r].total_ns), 1);
        }
        rows += std::string(rows.empty() ? "" : ",\n") + "    {\"shape\": \"" + s.label() + "\", \"kind\": \"" +
                (s.kind == shape::ring ? "ring" : "channel") + "\", \"msg_bytes\": " + std::to_string(s.msg) +
                ", \"mode\": \"" + (s.kind == shape::chan ? "ping-pong" : s.peek ? "peek" : "copy") +
                "\", \"count\": " + std::to_string(s.count) + ", \"c_p50_ns\": " + fmt(c_p50, 1) +
                ", \"cpp_p50_ns\": " + fmt(x_p50, 1) + ", \"c_msgs_per_s\": " + fmt(per_s(c_tot), 1) +
                ", \"cpp_msgs_per_s\": " + fmt(per_s(x_tot), 1) + ", \"cpp_over_c_paired\": " + fmt(ratio, 4) +
                ", \"runs_c_msgs_per_s\": [" + runs_c + "], \"runs_cpp_msgs_per_s\": [" + runs_x + "]}";
    }
    std::printf("\nTarget: the C++ API within 5%% of the C API (C++/C throughput >= 0.95, median of paired "
                "per-round ratios): %s\n",
                all ? "met everywhere" : "**missed** somewhere");
    for (std::size_t i = 0; i < shapes.size(); i++)
        std::printf("- %s: %s — %.3f×\n", shapes[i].label().c_str(), ratios[i] >= 0.95 ? "met" : "**missed**",
                    ratios[i]);
    std::string json = "{\n  \"benchmark\": \"cpp-ring\",\n  \"rounds\": " + std::to_string(rounds) +
                       ",\n  \"quick\": " + (quick ? "true" : "false") + ",\n  \"pinning\": \"producer CPU 0, consumer CPU 1\",\n" +
                       "  \"loadavg_before\": " + fmt(load_before, 2) + ",\n  \"loadavg_after\": " + fmt(loadavg(), 2) +
                       ",\n  \"target\": {\"name\": \"C++ within 5% of C (cpp/c >= 0.95)\", \"met_everywhere\": " +
                       (all ? "true" : "false") + "},\n  \"rows\": [\n" + rows + "\n  ]\n}\n";
    if (!write_file(out, json) || !write_file(svg_out, svg(shapes, ratios))) {
        std::fprintf(stderr, "ring_bench: could not write %s or %s\n", out.c_str(), svg_out.c_str());
        return 1;
    }
    std::string rm = "rm -rf '" + work_dir + "'";
    (void)std::system(rm.c_str());
    std::fprintf(stderr, "ring_bench: wrote %s and %s\n", out.c_str(), svg_out.c_str());
    return 0;
}
