// channel_receiver: listen on SOCKET, accept one channel and print what
// arrives until the sender is gone (error_kind::disconnected).
//   channel_receiver /tmp/demo.sock & channel_sender /tmp/demo.sock 1000
#include <zcio.hpp>

#include <cstdio>

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: channel_receiver SOCKET\n");
        return 2;
    }
    long count = 0;
    try {
        auto listener = zcio::listener::bind(argv[1]);
        auto ch = listener.accept();
        for (;;) {
            zcio::message m = ch.recv(); // the sender's pages, read in place
            if (count++ % 100 == 0) {
                auto text = m.to_vector(); // a private copy (the volatile rule)
                std::fwrite(text.data(), 1, text.size(), stdout);
                std::putchar('\n');
            }
        } // m is released here: its buffer goes back to the sender's pool
    } catch (const zcio::error &e) {
        if (e.kind() != zcio::error_kind::disconnected) {
            std::fprintf(stderr, "channel_receiver: %s\n", e.what());
            return 1;
        }
    }
    std::printf("channel_receiver: %ld messages, then the sender left\n", count);
}
