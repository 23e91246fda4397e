# tapegrad::blis: Debian's serial BLIS (libblis-serial-dev), as a static imported target. Used by
# the build and by the installed package's config, which finds it again on the consumer's machine
# rather than exporting the build machine's absolute path.
if(NOT TARGET tapegrad::blis)
  include(GNUInstallDirs)
  find_library(TG_BLIS_LIBRARY NAMES libblis.a
    PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/blis-serial NO_DEFAULT_PATH)
  find_path(TG_BLIS_INCLUDE_DIR blis.h
    PATHS /usr/include/${CMAKE_LIBRARY_ARCHITECTURE}/blis-serial NO_DEFAULT_PATH)
  if(TG_BLIS_LIBRARY AND TG_BLIS_INCLUDE_DIR)
    find_package(Threads REQUIRED)  # BLIS's memory pools lock with pthread mutexes
    add_library(tapegrad::blis STATIC IMPORTED)
    set_target_properties(tapegrad::blis PROPERTIES
      IMPORTED_LOCATION ${TG_BLIS_LIBRARY}
      INTERFACE_INCLUDE_DIRECTORIES ${TG_BLIS_INCLUDE_DIR}
      INTERFACE_LINK_LIBRARIES "Threads::Threads;m")
  endif()
endif()
