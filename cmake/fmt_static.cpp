// fmt compiled into flashjit (FLASHJIT_FMT_STATIC, the wheel's build): its non-template functions from
// format-inl.h (external definitions, FMT_HEADER_ONLY being unset), and the three templates format.h declares
// extern. libflashjit.so then needs no libfmt.so, and every other file compiles against fmt's headers as usual.
#include <fmt/format-inl.h>

#include <locale>

FMT_BEGIN_NAMESPACE
namespace detail {
template auto locale_ref::get<std::locale>() const -> std::locale;
template auto thousands_sep_impl<char>(locale_ref) -> thousands_sep_result<char>;
template auto decimal_point_impl<char>(locale_ref) -> char;
}  // namespace detail
FMT_END_NAMESPACE
