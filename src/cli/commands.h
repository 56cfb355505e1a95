#pragma once
namespace bitsim::cli { int main(int argc, char** argv); }
