// ring_producer: write COUNT lines into the named ring NAME (created if
// missing), after waiting for one consumer; destroying the producer ends
// the stream.   ring_consumer demo & ring_producer demo 1000
#include <zcio.hpp>

#include <chrono>
#include <cstdio>
#include <string>

int main(int argc, char **argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: ring_producer NAME COUNT\n");
        return 2;
    }
    try {
        zcio::ring_producer ring(argv[1], {.size = 1 << 20});
        if (ring.wait_consumers(1, std::chrono::seconds(10)) < 1) {
            std::fprintf(stderr, "ring_producer: no consumer within 10 s\n");
            return 1;
        }
        const int count = std::stoi(argv[2]);
        for (int i = 0; i < count; i++) {
            std::string line = "line " + std::to_string(i) + "\n";
            ring.write(std::as_bytes(std::span(line))); // one copy, into the ring
        }
        std::fprintf(stderr, "ring_producer: wrote %d lines\n", count);
    } catch (const zcio::error &e) {
        std::fprintf(stderr, "ring_producer: %s\n", e.what());
        return 1;
    }
}
