// tg::data::transforms: padding modes and crops derived by hand, torchvision's outputs and draws
// (transforms.txt, from make_transforms_fixtures.py), reproducible draws through the DataLoader
// with and without prefetching, and bad input.
#include <limits>
#include <set>

#include "data_test_util.hpp"
#include "tapegrad/data/transforms.hpp"

using namespace tg;
using tg::testing::fixture;
namespace T = tg::data::transforms;

namespace {

std::vector<float> floats(const Tensor& t) { return t.to_vector<float>(); }

// 1 ... 9 as a float32 image [1, 3, 3].
Tensor one_to_nine() { return tensor({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 3, 3}); }

// The transform of the fixture case `name`, called with a generator seeded as the case says; the
// output, and the generator's next torch.rand(3), equal torchvision's. Bit for bit, but for
// normal values (tolerance > 0): torch fills 16 or more with its AVX2 Box–Muller, tg as its scalar
// build does, and the two differ in the last bits.
template <typename MakeTransform>
void check_fixture(const std::string& name, const MakeTransform& make, double tolerance = 0) {
  const auto& expected = fixture("transforms.txt", name);
  INFO(name);
  Generator generator(static_cast<uint64_t>(expected.scalar("seed")));
  const auto transform = make(&generator);
  const Tensor output = transform(expected.at("image"));
  REQUIRE(output.shape() == expected.at("output").shape());
  if (tolerance == 0)
    CHECK(floats(output) == floats(expected.at("output")));
  else
    TG_REQUIRE_CLOSE(output, expected.at("output"), tolerance);
  CHECK(floats(rand({3}, generator)) == floats(expected.at("after")));
}

}  // namespace

TEST_CASE("RandomCrop pads as each padding_mode says, by hand", "[data][transforms]") {
  // A crop of the whole padded image makes no draw: it is the padded image itself.
  const Tensor image = one_to_nine();
  auto padded = [&](const std::string& mode) {
    return floats(T::RandomCrop(5, 1, {.fill = -1, .padding_mode = mode})(image));
  };
  CHECK(padded("constant") == std::vector<float>{-1, -1, -1, -1, -1,  //
                                                 -1, 1,  2,  3,  -1,  //
                                                 -1, 4,  5,  6,  -1,  //
                                                 -1, 7,  8,  9,  -1,  //
                                                 -1, -1, -1, -1, -1});
  CHECK(padded("edge") == std::vector<float>{1, 1, 2, 3, 3,  //
                                             1, 1, 2, 3, 3,  //
                                             4, 4, 5, 6, 6,  //
                                             7, 7, 8, 9, 9,  //
                                             7, 7, 8, 9, 9});
  CHECK(padded("reflect") == std::vector<float>{5, 4, 5, 6, 5,  //
                                                2, 1, 2, 3, 2,  //
                                                5, 4, 5, 6, 5,  //
                                                8, 7, 8, 9, 8,  //
                                                5, 4, 5, 6, 5});
  // symmetric repeats the edge: with 2 columns on the left, 2 1 | 1 2 3; nothing on the right.
  CHECK(floats(T::RandomCrop({3, 5}, {2, 0, 0, 0}, {.padding_mode = "symmetric"})(image)) ==
        std::vector<float>{2, 1, 1, 2, 3,  //
                           5, 4, 4, 5, 6,  //
                           8, 7, 7, 8, 9});
  // {left/right, top/bottom}: 0 columns, 1 row on each side.
  CHECK(floats(T::RandomCrop({5, 3}, {0, 1}, {.fill = 0})(image)) ==
        std::vector<float>{0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 0, 0});
}

TEST_CASE("RandomCrop takes the window at the drawn row and column", "[data][transforms]") {
  // Padded by 1 the image is the 5 × 5 constant case above; a 2 × 2 crop starts at row i and
  // column j, each torch.randint(0, 4): drawn here from a second generator with the same seed.
  const std::vector<float> padded{0, 0, 0, 0, 0, 0, 1, 2, 3, 0, 0, 4, 5, 6, 0, 0, 7, 8, 9, 0, 0, 0, 0, 0, 0};
  std::set<std::pair<int64_t, int64_t>> places;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    Generator generator(seed), reference(seed);
    const Tensor crop = T::RandomCrop(2, 1, {.generator = &generator})(one_to_nine());
    const int64_t i = randint(0, 4, {1}, kInt64, &reference).item<int64_t>();
    const int64_t j = randint(0, 4, {1}, kInt64, &reference).item<int64_t>();
    places.insert({i, j});
    auto at = [&](int64_t r, int64_t c) { return padded[static_cast<size_t>(r * 5 + c)]; };
    REQUIRE(crop.shape() == Shape{1, 2, 2});
    CHECK(floats(crop) == std::vector<float>{at(i, j), at(i, j + 1), at(i + 1, j), at(i + 1, j + 1)});
    CHECK(rand({1}, generator).item() == rand({1}, reference).item());  // two draws, no more
  }
  CHECK(places.size() > 8);  // the seeds reach many places: the draws are used
}

TEST_CASE("RandomHorizontalFlip mirrors every row, with probability p", "[data][transforms]") {
  const Tensor image = tensor({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat64);
  CHECK(T::RandomHorizontalFlip(1)(image).to_vector<double>() == std::vector<double>{3, 2, 1, 6, 5, 4});
  CHECK(T::RandomHorizontalFlip(0)(image).to_vector<double>() == std::vector<double>{1, 2, 3, 4, 5, 6});
  // int64 and bool images flip too.
  CHECK(T::RandomHorizontalFlip(1)(tensor(std::vector<int64_t>{1, 2, 3}, {1, 3})).to_vector<int64_t>() ==
        std::vector<int64_t>{3, 2, 1});
  int flips = 0;
  Generator generator(3);
  const T::RandomHorizontalFlip flip(0.5, &generator);
  for (int k = 0; k < 200; ++k) flips += flip(image).to_vector<double>()[0] == 3 ? 1 : 0;
  CHECK(flips > 70);
  CHECK(flips < 130);
}

TEST_CASE("The transforms make torchvision's draws and images", "[data][transforms][fixture]") {
  for (int seed = 0; seed < 6; ++seed) {
    const std::string s = "_seed" + std::to_string(seed);
    check_fixture("crop_fill" + s, [](Generator* g) { return T::RandomCrop({3, 4}, 1, {.fill = -1, .generator = g}); });
    check_fixture("flip" + s, [](Generator* g) { return T::RandomHorizontalFlip(0.5, g); });
    check_fixture("flip_p0p3" + s, [](Generator* g) { return T::RandomHorizontalFlip(0.3, g); });
    check_fixture("erasing" + s, [](Generator* g) { return T::RandomErasing({.generator = g}); });
  }
  for (int seed = 0; seed < 3; ++seed) {
    const std::string s = "_seed" + std::to_string(seed);
    for (const std::string mode : {"constant", "edge", "reflect", "symmetric"})
      check_fixture("crop_" + mode + s, [&](Generator* g) {
        return T::RandomCrop({5, 6}, {2, 1, 0, 2}, {.fill = 7, .padding_mode = mode, .generator = g});
      });
    check_fixture("crop_pad_if_needed" + s, [](Generator* g) {
      return T::RandomCrop(5, {1, 0}, {.pad_if_needed = true, .fill = 9, .generator = g});
    });
    check_fixture("erasing_values" + s,
                  [](Generator* g) { return T::RandomErasing({.p = 1, .value = {-1, -2, -3}, .generator = g}); });
    check_fixture("erasing_random" + s, [](Generator* g) {
      return T::RandomErasing({.p = 1, .scale = {0.1, 0.5}, .ratio = {0.5, 2}, .random_value = true, .generator = g});
    }, 1e-5);
  }
  for (int seed = 0; seed < 2; ++seed)
    check_fixture("compose_seed" + std::to_string(seed), [](Generator* g) {
      return T::Compose({T::RandomCrop(28, 2, {.fill = -0.8, .generator = g}), T::RandomHorizontalFlip(0.5, g)});
    });
  check_fixture("crop_whole_seed0", [](Generator* g) { return T::RandomCrop({4, 5}, 0, {.generator = g}); });
  // Ten attempts that cannot fit: twenty draws after the first, and the image unchanged.
  check_fixture("erasing_no_fit_seed0",
                [](Generator* g) { return T::RandomErasing({.p = 1, .scale = {0.99, 1}, .ratio = {1, 1}, .generator = g}); });
}

TEST_CASE("Normalize subtracts and divides per channel, in the image's dtype", "[data][transforms]") {
  const Tensor image = tensor({1, 2, 3, 4, 10, 20, 30, 40}, {2, 2, 2}, kFloat64);
  CHECK(T::Normalize({1, 10}, {2, 5})(image).to_vector<double>() ==
        std::vector<double>{0, 0.5, 1, 1.5, 0, 2, 4, 6});
  CHECK(T::Normalize({1}, {2})(image.unsqueeze(0)).to_vector<double>() ==
        std::vector<double>{0, 0.5, 1, 1.5, 4.5, 9.5, 14.5, 19.5});
  // float32: the mean and std rounded to float32 first, as torch.as_tensor(mean, dtype) does.
  const float expected = (1.0f - static_cast<float>(0.1)) / static_cast<float>(0.3);
  CHECK(T::Normalize({0.1}, {0.3})(ones({1, 1, 1})).item<float>() == expected);
}

TEST_CASE("Equal seeds give equal images through a DataLoader, whatever the prefetching", "[data][transforms][loader]") {
  // 64 images [1, 6, 6] of distinct pixels, augmented by every random transform.
  const Tensor images = tg::data_test::arange(64 * 36).to(kFloat32).reshape({64, 1, 6, 6});
  const data::TensorDataset dataset(images, tg::data_test::arange(64));
  const T::Compose augment({T::RandomCrop(6, 1), T::RandomHorizontalFlip(), T::RandomErasing({.p = 0.7})});
  auto run = [&](uint64_t seed, int64_t prefetch, int threads) {
    set_num_threads(threads);
    Generator generator(seed);
    const data::DataLoader loader(dataset, {.batch_size = 5,
                                            .shuffle = true,
                                            .generator = &generator,
                                            .prefetch = prefetch,
                                            .transform = T::sample_transform(augment)});
    std::vector<float> pixels;
    for (int epoch = 0; epoch < 2; ++epoch)
      for (const data::Example& batch : loader) {
        const std::vector<float> values = floats(batch.data);
        pixels.insert(pixels.end(), values.begin(), values.end());
      }
    return pixels;
  };
  const int threads_before = get_num_threads();
  const std::vector<float> reference = run(7, 0, 1);
  REQUIRE(reference.size() == 2 * 64 * 36);
  // Augmented: fewer distinct pixel values than the 64 · 36 of the images (padding, erasing).
  CHECK(std::set<float>(reference.begin(), reference.end()).size() < 64 * 36);
  for (const int64_t prefetch : {1, 3, 8})
    for (const int threads : {1, 2, 4}) {
      INFO("prefetch " << prefetch << ", " << threads << " threads");
      CHECK(run(7, prefetch, threads) == reference);
    }
  CHECK(run(8, 2, 2) != reference);
  // The draws come from the batch's generator, not the default one: reseeding it changes nothing.
  manual_seed(123);
  const std::vector<float> again = run(7, 0, 1);
  manual_seed(456);
  CHECK(run(7, 0, 1) == again);
  CHECK(again == reference);
  set_num_threads(threads_before);
}

TEST_CASE("transform_generator is the batch's inside a loader and the default one outside", "[data][transforms][loader]") {
  CHECK(&data::transform_generator() == &default_generator());
  Generator generator(0);
  const Generator* seen = nullptr;
  const data::DataLoader loader(data::TensorDataset(tg::data_test::arange(4), tg::data_test::arange(4)),
                                {.batch_size = 4, .generator = &generator, .transform = [&](data::Example sample) {
                                   seen = &data::transform_generator();
                                   return sample;
                                 }});
  for (const data::Example& batch : loader) (void)batch;
  CHECK(seen != nullptr);
  CHECK(seen != &default_generator());
  CHECK(seen != &generator);
  CHECK(&data::transform_generator() == &default_generator());
}

TEST_CASE("The transforms refuse bad options and images with tg::Error", "[data][transforms][errors]") {
  const Tensor image = one_to_nine();
  REQUIRE_TG_ERROR(T::RandomCrop(4)(image), Catch::Contains("Required crop size (4, 4) is larger than input image size (3, 3)"));
  REQUIRE_TG_ERROR(T::RandomCrop(0), Catch::Contains("RandomCrop") && Catch::Contains("size should be >= 1"));
  REQUIRE_TG_ERROR(T::RandomCrop(2, -1), Catch::Contains("padding should be >= 0"));
  REQUIRE_TG_ERROR(T::RandomCrop(2, 0, {.padding_mode = "wrap"}), Catch::Contains("padding_mode") && Catch::Contains("wrap"));
  REQUIRE_TG_ERROR(T::RandomCrop(3, 3, {.padding_mode = "reflect"})(image),
                   Catch::Contains("reflect") && Catch::Contains("[1, 3, 3]"));
  REQUIRE_TG_ERROR(T::RandomCrop(3, 4, {.padding_mode = "symmetric"})(image), Catch::Contains("symmetric"));
  REQUIRE_TG_ERROR(T::RandomCrop(1)(tensor({1, 2, 3})), Catch::Contains("[..., H, W]") && Catch::Contains("[3]"));
  // Huge paddings name RandomCrop (its padded image once said "empty:"), and never wrap around.
  REQUIRE_TG_ERROR(T::RandomCrop(3, int64_t{1} << 40)(image), Catch::StartsWith("RandomCrop: shape [1, 2199023255555, "));
  REQUIRE_TG_ERROR(T::RandomCrop(3, std::numeric_limits<int64_t>::max())(image),
                   Catch::StartsWith("RandomCrop: padding an image of shape [1, 3, 3]") && Catch::Contains("overflows int64"));
  REQUIRE_TG_ERROR(T::RandomCrop(std::numeric_limits<int64_t>::max(), 0, {.pad_if_needed = true})(image),
                   Catch::StartsWith("RandomCrop: padding an image of shape [1, 3, 3]"));
  REQUIRE_TG_ERROR(T::ImagePadding({1, 2, 3}), Catch::Contains("ImagePadding") && Catch::Contains("3 values"));
  REQUIRE_TG_ERROR(T::ImageSize({1, 2, 3}), Catch::Contains("ImageSize"));
  REQUIRE_TG_ERROR(T::RandomHorizontalFlip(1.5), Catch::Contains("p should be between 0 and 1"));
  REQUIRE_TG_ERROR(T::RandomHorizontalFlip()(image.clone().requires_grad_()), Catch::Contains("requires grad"));
  REQUIRE_TG_ERROR(T::RandomErasing({.p = -0.1}), Catch::Contains("probability"));
  REQUIRE_TG_ERROR(T::RandomErasing({.scale = {0.5, 1.5}}), Catch::Contains("Scale should be between 0 and 1"));
  REQUIRE_TG_ERROR(T::RandomErasing({.scale = {0.5, 0.2}}), Catch::Contains("(min, max)"));
  REQUIRE_TG_ERROR(T::RandomErasing({.ratio = {0, 1}}), Catch::Contains("ratio"));
  REQUIRE_TG_ERROR(T::RandomErasing({.p = 1, .value = {1, 2}})(image), Catch::Contains("number of input channels"));
  REQUIRE_TG_ERROR(T::RandomErasing()(tensor({1, 2, 3, 4}, {2, 2})), Catch::Contains("[..., C, H, W]"));
  REQUIRE_TG_ERROR(T::RandomErasing()(tensor(std::vector<int64_t>{1, 2, 3, 4}, {1, 2, 2})), Catch::Contains("int64"));
  REQUIRE_TG_ERROR(T::Normalize({0}, {0}), Catch::Contains("std evaluated to zero"));
  REQUIRE_TG_ERROR(T::Normalize({0}, {1e-50})(image), Catch::Contains("std evaluated to zero after conversion to float32"));
  REQUIRE_TG_ERROR(T::Normalize({0, 0}, {1, 1})(image), Catch::Contains("1 or C = 1") && Catch::Contains("[1, 3, 3]"));
  REQUIRE_TG_ERROR(T::Normalize({0}, {1})(tensor(std::vector<int64_t>{1}, {1, 1, 1})), Catch::Contains("float32 or float64"));
  REQUIRE_TG_ERROR(T::Normalize({}, {1}), Catch::Contains("at least one value"));
  REQUIRE_TG_ERROR(T::Compose({T::Transform{}}), Catch::Contains("Compose") && Catch::Contains("transform 0 is empty"));
}
