// rendezvous_client: connect to the rendezvous_server at SOCKET and make
// three calls: each sends [i, 10] and waits for the answer [i + 10].
//   rendezvous_server /tmp/rdv.sock 1 & rendezvous_client /tmp/rdv.sock
#include <zcio.hpp>

#include <cstdio>
#include <thread>

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: rendezvous_client SOCKET\n");
        return 2;
    }
    try {
        std::optional<zcio::rendezvous> ep;
        for (int tries = 0; !ep; tries++) { // the server may still be starting
            try {
                ep = zcio::rendezvous::connect(argv[1]);
            } catch (const zcio::error &e) {
                if ((e.kind() != zcio::error_kind::not_found && e.errnum() != ECONNREFUSED) || tries == 500) throw;
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
        }
        for (std::uint64_t i = 0; i < 3; i++) {
            zcio::envelope answer = ep->call(zcio::envelope(1, {i, 10})); // send, wait for the answer
            std::printf("%llu + 10 = %llu\n", static_cast<unsigned long long>(i),
                        static_cast<unsigned long long>(answer.word(0)));
        }
    } catch (const zcio::error &e) {
        std::fprintf(stderr, "rendezvous_client: %s\n", e.what());
        return 1;
    }
}
