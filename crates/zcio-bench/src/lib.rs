pub mod iox;
