#include "perseus/server/tls_socket.hpp"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <sys/socket.h>

#include <boost/asio/ssl/error.hpp>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <new>

namespace perseus::server {
namespace {

int descriptor(BIO* bio) {
  return static_cast<int>(reinterpret_cast<std::intptr_t>(BIO_get_data(bio)));
}

int socket_write(BIO* bio, const char* data, int size) {
  BIO_clear_retry_flags(bio);
  const ssize_t n = ::send(descriptor(bio), data, static_cast<std::size_t>(size), MSG_NOSIGNAL);
  if (n >= 0) return static_cast<int>(n);
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) BIO_set_retry_write(bio);
  return -1;
}

int socket_read(BIO* bio, char* data, int size) {
  BIO_clear_retry_flags(bio);
  const ssize_t n = ::recv(descriptor(bio), data, static_cast<std::size_t>(size), 0);
  if (n >= 0) return static_cast<int>(n);
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) BIO_set_retry_read(bio);
  return -1;
}

long socket_control(BIO*, int command, long, void*) {
  return command == BIO_CTRL_FLUSH ? 1 : 0;
}

int socket_create(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

// The BIO method, made once: recv and send on the descriptor held as the BIO's data.
BIO_METHOD* socket_method() {
  static BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR,
                                 "perseus socket");
    if (!m || !BIO_meth_set_write(m, socket_write) || !BIO_meth_set_read(m, socket_read) ||
        !BIO_meth_set_ctrl(m, socket_control) || !BIO_meth_set_create(m, socket_create)) {
      throw std::bad_alloc();
    }
    return m;
  }();
  return method;
}

}  // namespace

void prepare_server_context(boost::asio::ssl::context& context) {
  SSL_CTX* ctx = context.native_handle();
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE |
                            SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
}

TlsSocket::TlsSocket(tcp::socket socket, boost::asio::ssl::context& context)
    : socket_(std::move(socket)) {
  boost::system::error_code ignored;
  socket_.non_blocking(true, ignored);
  ssl_ = SSL_new(context.native_handle());
  BIO* bio = ssl_ ? BIO_new(socket_method()) : nullptr;
  if (!bio) {
    SSL_free(ssl_);
    throw std::bad_alloc();
  }
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<std::intptr_t>(socket_.native_handle())));
  SSL_set_bio(ssl_, bio, bio);  // the SSL object owns the BIO
  SSL_set_accept_state(ssl_);
}

TlsSocket::~TlsSocket() {
  SSL_free(ssl_);
}

template <class Call>
TlsSocket::Step TlsSocket::step_of(Call call) {
  ERR_clear_error();
  errno = 0;
  return after(call());
}

TlsSocket::Step TlsSocket::handshake_step() {
  Step step = step_of([this] { return SSL_do_handshake(ssl_); });
  if (step.ec) discard_received();
  return step;
}

void TlsSocket::discard_received() {
  char scrap[4096];
  for (int i = 0; i < 16; ++i) {
    if (::recv(socket_.native_handle(), scrap, sizeof scrap, MSG_DONTWAIT) <= 0) return;
  }
}

template <class Buffer, class Transfer>
TlsSocket::Step TlsSocket::move_bytes(Buffer buffer, Transfer transfer) {
  if (buffer.size() == 0) return {};
  std::size_t n = 0;
  Step step = step_of([&] { return transfer(ssl_, buffer.data(), buffer.size(), &n); });
  if (step.wait == Step::Wait::none && !step.ec) step.bytes = n;
  return step;
}

TlsSocket::Step TlsSocket::read_step(boost::asio::mutable_buffer buffer) {
  return move_bytes(buffer, SSL_read_ex);
}

TlsSocket::Step TlsSocket::write_step(boost::asio::const_buffer buffer) {
  return move_bytes(buffer, SSL_write_ex);
}

void TlsSocket::send_close_notify() {
  ERR_clear_error();
  if (SSL_is_init_finished(ssl_)) SSL_shutdown(ssl_);
}

TlsSocket::Step TlsSocket::after(int result) {
  const int saved_errno = errno;
  switch (SSL_get_error(ssl_, result)) {
    case SSL_ERROR_NONE:
      return {};
    case SSL_ERROR_WANT_READ:
      return {Step::Wait::read, {}, 0};
    case SSL_ERROR_WANT_WRITE:
      return {Step::Wait::write, {}, 0};
    case SSL_ERROR_ZERO_RETURN:
      return {Step::Wait::none, boost::asio::error::eof, 0};
    case SSL_ERROR_SYSCALL:
      if (saved_errno == 0) return {Step::Wait::none, boost::asio::error::eof, 0};
      return {Step::Wait::none, {saved_errno, boost::system::system_category()}, 0};
    default: {
      const unsigned long code = ERR_get_error();
      return {Step::Wait::none,
              {code ? static_cast<int>(code) : SSL_R_UNEXPECTED_RECORD,
               boost::asio::error::get_ssl_category()},
              0};
    }
  }
}

}  // namespace perseus::server
