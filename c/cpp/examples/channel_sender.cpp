// channel_sender: connect to SOCKET and send COUNT messages, each filled in
// place in a pool buffer and sent by reference (no copy).
//   channel_receiver /tmp/demo.sock & channel_sender /tmp/demo.sock 1000
#include <zcio.hpp>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

int main(int argc, char **argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: channel_sender SOCKET COUNT\n");
        return 2;
    }
    try {
        std::optional<zcio::channel> ch;
        for (int tries = 0; !ch; tries++) { // the receiver may still be starting
            try {
                ch = zcio::channel::connect(argv[1]);
            } catch (const zcio::error &e) {
                if ((e.kind() != zcio::error_kind::not_found && e.errnum() != ECONNREFUSED) || tries == 500) throw;
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
        }
        zcio::pool pool("sender");
        const int count = std::stoi(argv[2]);
        for (int i = 0; i < count; i++) {
            zcio::buffer buf = pool.alloc(64 << 10);                  // reserve
            std::string line = "message " + std::to_string(i);
            std::memcpy(buf.data().data(), line.data(), line.size()); // fill
            buf.truncate(line.size());
            ch->send(std::move(buf).freeze());                        // send
        }
        std::printf("channel_sender: sent %d messages\n", count);
    } catch (const zcio::error &e) { // closing the channel ends the receiver's loop
        std::fprintf(stderr, "channel_sender: %s\n", e.what());
        return 1;
    }
}
