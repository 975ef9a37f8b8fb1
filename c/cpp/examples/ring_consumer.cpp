// ring_consumer: read the named ring NAME (created if missing) from its
// oldest byte to the end of the stream, and copy it to stdout.
//   ring_consumer demo & ring_producer demo 1000
#include <zcio.hpp>

#include <cstdio>

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: ring_consumer NAME\n");
        return 2;
    }
    try {
        using zcio::ring_consumer;
        ring_consumer ring(argv[1], ring_consumer::start::oldest, 1 << 20);
        std::size_t total = 0;
        for (;;) {
            zcio::ring_peek block = ring.peek(); // in place, no copy
            if (!block) break;                   // the producer closed the ring
            std::fwrite(block.bytes().data(), 1, block.size(), stdout);
            total += block.size();
            if (!std::move(block).release()) return 1; // overwritten while read
        }
        zcio::ring_unlink(argv[1]);
        std::fprintf(stderr, "ring_consumer: %zu bytes\n", total);
    } catch (const zcio::error &e) {
        std::fprintf(stderr, "ring_consumer: %s\n", e.what());
        return 1;
    }
}
