// typed_lane: a typed message and a lane between two processes (this
// program forks its receiver).   typed_lane /tmp/typed.sock
#include <zcio.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

struct reading { // no padding bytes: every byte is sent
    std::uint64_t seq;
    double value;
    std::uint32_t sensor, reserved;
};

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: typed_lane SOCKET\n");
        return 2;
    }
    const zcio::typed<reading> ty("example.Reading", 1); // Rust: Tag::new("example.Reading", 1)
    auto listener = zcio::listener::bind(argv[1]);
    if (fork() == 0) { // the receiver
        auto ch = zcio::channel::connect(argv[1]);
        reading r = ty.read(ch.recv()); // tag and size checked, copied out
        auto rx = ch.accept_lane();
        zcio::lane_msg m = rx.recv();   // in place; destroying it gives the slot back
        std::printf("reading %llu from sensor %u: %.1f; lane: %.*s\n", static_cast<unsigned long long>(r.seq),
                    r.sensor, r.value, static_cast<int>(m.size()), reinterpret_cast<const char *>(m.bytes().data()));
        std::fflush(stdout);
        _exit(0);
    }
    try {
        auto ch = listener.accept();
        zcio::pool pool("typed");
        zcio::typed_buffer<reading> b = ty.alloc(pool); // reserve: the tag, then a reading in place
        b->seq = 7;                                      // fill
        b->value = 21.5;
        b->sensor = 3;
        ch.send(std::move(b).freeze()); // send
        auto tx = ch.open_lane(16, 256);
        zcio::lane_loan loan = tx.loan(); // a slot only this process writes
        std::memcpy(loan.data().data(), "hello", 5);
        std::move(loan).send(5);
        int status = 0;
        wait(&status); // the lane and the channel stay open until the receiver is done
        return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    } catch (const zcio::error &e) {
        std::fprintf(stderr, "typed_lane: %s\n", e.what());
        return 1;
    }
}
