/// @file
/// CSV files of numbers: an optional header line, then one sample per line, one column of which
/// may be the label.
///
/// @code
///   // sepal_length,sepal_width,species
///   // 5.1,3.5,0
///   auto [features, labels] = tg::data::read_csv("iris.csv", {.label_column = -1});
///   // features float32 [rows, 2], labels int64 [rows]
/// @endcode
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tapegrad/dtype.hpp"
#include "tapegrad/tensor.hpp"

namespace tg::data {

/// read_csv's options.
struct CsvOptions {
  bool header = true;                          ///< the first line names the columns: skipped
  std::optional<int64_t> label_column = -1;    ///< negative counts from the end; nullopt: no labels
  char delimiter = ',';                        ///< the character between fields
  DType dtype = kFloat32;                      ///< of the features: float32 or float64
  DType label_dtype = kInt64;                  ///< int64 (class indices), float32 or float64
};

/// What read_csv returns: the features, the labels and the feature columns' names.
struct CsvData {
  Tensor features;                   ///< [rows, columns − 1], or [rows, columns] without labels
  Tensor labels;                     ///< [rows]; undefined without a label column
  std::vector<std::string> columns;  ///< the header's names of the feature columns (empty without)
};

/// Reads the CSV file at `path`: numbers as C's strtod reads them (nan and inf included), spaces
/// around a field ignored, `\n` or `\r\n` line ends, empty lines skipped. tg::Error naming the file,
/// the line, the column and the byte offset for a missing file, an empty or non-numeric field, a
/// line with another number of fields than the first, a label that is not an integer for int64
/// labels, or a label column outside the columns.
CsvData read_csv(const std::string& path, const CsvOptions& options = {});

}  // namespace tg::data
